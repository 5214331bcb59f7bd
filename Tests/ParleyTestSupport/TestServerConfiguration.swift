import Foundation
import ParleyServer

extension ServerConfiguration {
    /// A server for tests: 127.0.0.1, OS-chosen ports, two loops, a fresh data directory.
    public static func forTests(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) -> ServerConfiguration {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.httpPort = 0
        configuration.linePort = 0
        configuration.loops = .fixed(2)
        configuration.dataDirectory = NSTemporaryDirectory() + "parley-test-\(UUID().uuidString)"
        adjust(&configuration)
        return configuration
    }
}
