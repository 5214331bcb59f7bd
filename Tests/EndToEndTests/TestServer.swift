import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// A real server on 127.0.0.1 with OS-chosen ports, stopped by `stop()`.
struct TestServer {
    let server: ParleyServer

    static func start(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> TestServer {
        TestServer(server: try ParleyServer(configuration: .forTests(adjust)))
    }

    var lobby: RoomKey { server.configuration.lobby }

    /// A line-protocol client that has said `iam:NAME` and seen its own join.
    func lineClient(name: String) throws -> TestSocket {
        let socket = try TestSocket(port: server.linePort)
        try socket.send("iam:\(name)\n")
        _ = try socket.readLine(until: { $0 == "\(name) has joined" })
        return socket
    }

    func stop() { server.shutdown(timeout: .seconds(1)) }
}
