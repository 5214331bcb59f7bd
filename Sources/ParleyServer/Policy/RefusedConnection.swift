import ParleyHTTP
import ParleyIO

/// A connection refused at accept: says why (a line, or a 503 once the request has been read,
/// so closing does not reset a request the peer is still sending) and closes.
final class RefusedConnection: ConnectionHandler {
    let message: String
    let http: Bool
    private var received: [UInt8] = []
    private var timer: LoopTimer?
    private var answered = false

    init(connection: TCPConnection, message: String, http: Bool) {
        self.message = message
        self.http = http
        if http {
            // Wait briefly for the request head; answer anyway after a moment.
            let timer = LoopTimer(loop: connection.loop)
            self.timer = timer
            timer.start(after: 1000) { [weak self, weak connection] in
                guard let self, let connection else { return }
                self.answer(connection)
            }
        } else {
            connection.write("error: \(message)\n")
            connection.close()
            answered = true
        }
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        guard !answered else { return }
        received.append(contentsOf: bytes.prefix(max(0, 16_384 - received.count)))
        let text = received.suffix(4)
        if Array(text) == Array("\r\n\r\n".utf8) || received.count >= 16_384 { answer(connection) }
    }

    private func answer(_ connection: TCPConnection) {
        guard !answered else { return }
        answered = true
        timer?.stop()
        var response = HTTPResponse.text(503, message + "\n")
        response.headers.set("Retry-After", "5")
        connection.write(response.encoded(keepAlive: false))
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        timer?.stop()
        timer = nil
    }
}
