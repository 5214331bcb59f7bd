import Dispatch
import ParleyIO
@testable import ParleyServer
import ParleyTestSupport

// What a test may wait for inside an in-process server, so it waits for a condition instead
// of sleeping for a while.
extension ParleyServer {
    /// Connections the server has admitted and not yet released, across all doors (what
    /// `parley_open_connections` reports, read without a request that would count itself).
    var openConnectionCount: Int { core.gate.open.load(ordering: .relaxed) }

    /// Returns once every event loop has handled what reached the server before the call,
    /// and what that caused on other loops: bytes already sent by the test are read and
    /// acted on, and their tasks for other loops have run.
    ///
    /// Each round runs one task on every loop and waits for all of them. A task runs after
    /// everything queued on its loop before it, and a loop starts the next round in a later
    /// iteration than the previous one, after polling the sockets whose bytes were there
    /// before; each round therefore carries every chain of work one hop further (socket read,
    /// hand-over to the session's loop, the session's reply). `rounds` bounds the hops.
    func settle(rounds: Int = 6) throws {
        for round in 1...rounds {
            let group = DispatchGroup()
            for loop in self.group.loops {
                group.enter()
                loop.execute { group.leave() }
            }
            // A stopped or stuck loop: fail instead of waiting forever.
            guard group.wait(timeout: .now() + 10) == .success else {
                throw TimeoutError(what: "round \(round) of the server's loops", seconds: 10)
            }
        }
    }
}
