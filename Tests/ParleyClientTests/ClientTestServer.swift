import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A real in-process server on 127.0.0.1 with OS-chosen ports (like EndToEndTests' TestServer).
func startClientTestServer(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> ParleyServer {
    try ParleyServer(configuration: .forTests(adjust))
}

func nativeURL(port: Int) -> URL { URL(string: "ws://127.0.0.1:\(port)/v3/websocket")! }

/// Fails the test instead of hanging: runs `body` with a deadline.
func within<T: Sendable>(_ seconds: Double, _ what: String = "operation",
                         _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
            return nil
        }
        guard let first = try await group.next(), let value = first else {
            group.cancelAll()
            throw TimeoutError(what: what, seconds: seconds)
        }
        group.cancelAll()
        return value
    }
}
