import Foundation
import ParleyClient
import ParleyCore
import ParleyIO
import ParleyTestSupport
import ParleyWebSocket
import Synchronization
import Testing

/// A tiny fake native server: accepts the upgrade, answers the handshake, then closes with a
/// chosen code — what a real server does when it bans or de-authorizes a client.
final class ClosingFakeServer: Sendable {
    private let group = EventLoopGroup(loopCount: 1)
    private let listener: TCPListener
    var port: Int { listener.port }

    init(closeCode: UInt16, reason: String) throws {
        let counter = Counter()
        listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            counter.value.add(1, ordering: .relaxed)
            connection.handler = FakeSession(closeCode: closeCode, reason: reason)
        }
        self.counter = counter
    }

    private let counter: Counter
    final class Counter: Sendable { let value = Atomic<Int>(0) }
    var connections: Int { counter.value.load(ordering: .relaxed) }

    func stop() {
        listener.close()
        group.shutdown()
    }

    private final class FakeSession: ConnectionHandler {
        let closeCode: UInt16
        let reason: String
        var head: [UInt8] = []
        var machine: WebSocketProtocolMachine?

        init(closeCode: UInt16, reason: String) {
            self.closeCode = closeCode
            self.reason = reason
        }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            if let machine {
                for action in machine.receive(bytes) {
                    switch action {
                    case .text(let text):
                        guard let command = try? JSONParser.parse(text), command["type"] == "handshake",
                              let callback = command["callback"]?.intValue else { continue }
                        connection.write(machine.sendText(#"{"callback":\#(callback),"client_id":"fake"}"#))
                        for case .send(let frame) in machine.close(code: WebSocketCloseCode(rawValue: closeCode), reason: reason) {
                            connection.write(frame)
                        }
                    case .send(let frame): connection.write(frame)
                    case .closeConnection: connection.close()
                    default: break
                    }
                }
                return
            }
            head.append(contentsOf: bytes)
            let text = String(decoding: head, as: UTF8.self)
            guard text.contains("\r\n\r\n") else { return }
            let key = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
            connection.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             + "Sec-WebSocket-Accept: \(WebSocketHandshake.acceptValue(forKey: key))\r\n\r\n")
            machine = WebSocketProtocolMachine(role: .server, deflate: nil)
        }

        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {}
    }
}

@Suite(.serialized) struct FatalCloseTests {
    /// 4xxx and 1008 mean "do not come back": the client stops instead of looping.
    @Test(arguments: [UInt16(4001), 1008])
    func noReconnectAfterAFatalClose(code: UInt16) async throws {
        let server = try ClosingFakeServer(closeCode: code, reason: "banned")
        defer { server.stop() }
        let client = ParleyClient(url: nativeURL(port: server.port), channel: "demo",
                                  reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(50)))
        try await client.connect()
        try await eventually("rejected") {
            if case .disconnected(.rejected) = await client.state { true } else { false }
        }
        // A client with the same policy sent away with 1001 comes back three times meanwhile;
        // this one never does.
        try await waitForControlClientReconnects(3, policy: client.reconnectPolicy)
        #expect(server.connections == 1)
    }

    /// An ordinary close (1001 going away, e.g. a server restart) is retried.
    @Test func reconnectsAfterGoingAway() async throws {
        let server = try ClosingFakeServer(closeCode: 1001, reason: "restart")
        defer { server.stop() }
        let client = ParleyClient(url: nativeURL(port: server.port), channel: "demo",
                                  reconnectPolicy: ReconnectPolicy(initialDelay: .milliseconds(20), maxDelay: .milliseconds(50)))
        try await client.connect()
        try await eventually("several reconnects") { server.connections >= 3 }
        await client.disconnect()
        #expect(await client.state == .disconnected(.closedByClient))
    }
}
