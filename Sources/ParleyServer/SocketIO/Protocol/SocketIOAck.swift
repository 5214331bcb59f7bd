import ParleyCore
import ParleyIO
import Synchronization

/// The answer to one client event that asked for an acknowledgement. An application may
/// answer at once or later, from any thread (e.g. once a store write is durable): the ACK
/// then hops to the connection's loop. Only the first answer counts; an answer after the
/// socket has left (or reconnected) is dropped.
///
/// `@unchecked Sendable` proof: `socket` is a `let` and only dereferenced on `loop`: inline
/// when `send` runs on that loop's thread, otherwise inside `LoopBound.run`, which executes
/// on that loop. `answered` is atomic; every other stored property is an immutable value.
final class SocketIOAck: @unchecked Sendable {
    /// The ack id the client chose.
    let id: Int
    private let socket: SocketIOSocket
    private let generation: Int
    private let loop: EventLoop
    private let answered = Atomic<Bool>(false)

    init(socket: SocketIOSocket, id: Int) {
        self.id = id
        self.socket = socket
        generation = socket.generation
        loop = socket.loop
    }

    /// Whether ``send(_:attachments:)`` was called already.
    var isAnswered: Bool { answered.load(ordering: .acquiring) }

    /// Sends the ACK with these arguments (placeholders for `attachments`, as in
    /// ``SocketIOSocket/emit(_:_:attachments:ack:)``). Returns false when it was answered before.
    @discardableResult
    func send(_ arguments: [JSONValue] = [], attachments: [[UInt8]] = []) -> Bool {
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        let id = self.id, generation = self.generation
        if loop.inEventLoop {
            socket.answer(id, generation: generation, arguments, attachments: attachments)
        } else {
            LoopBound(socket, on: loop).execute { $0.answer(id, generation: generation, arguments, attachments: attachments) }
        }
        return true
    }
}
