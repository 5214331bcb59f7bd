import Foundation
import ParleyTestSupport

/// An HTTP request sent now whose response is read later: for requests the server holds
/// (a Socket.IO long-poll) while the test does something else.
final class HeldRequest {
    let socket: TestSocket

    /// Connects and sends `method target` with `Connection: close`; returns once the bytes
    /// are with the server's kernel (`ParleyServer.settle()` then makes sure the server acted
    /// on them).
    init(port: Int, _ method: String, _ target: String) throws {
        socket = try TestSocket(port: port)
        try socket.send(HTTPTestClient.requestBytes(method, target))
    }

    /// The response, once the server has answered and closed (at most `timeout` seconds).
    func response(timeout: Double = 5) throws -> HTTPTestResponse {
        let deadline = Date().addingTimeInterval(timeout)
        while try socket.fill(timeout: min(0.2, max(0, deadline.timeIntervalSinceNow))) {
            guard deadline.timeIntervalSinceNow > 0 else {
                throw TestSocket.Failure("the held request was not answered and closed within \(timeout) s")
            }
        }
        return try HTTPTestResponse(received: socket.buffered)
    }
}
