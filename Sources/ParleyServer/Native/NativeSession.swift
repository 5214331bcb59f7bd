import ParleyCore
import ParleyIO
import ParleyWebSocket

/// One Scaledrone v3 connection (protocols.md §1) after the WebSocket upgrade.
///
/// A thin door: it parses commands, calls the hub, and writes replies; room events arrive
/// already encoded once per loop (``NativeEncoding``) and are written as shared bytes, or
/// compressed per connection when permessage-deflate was negotiated.
final class NativeSession: ConnectionHandler, RoomSubscriber, GracefulSession {
    let connection: TCPConnection
    let core: ServerCore
    var sessionID: SessionID { connection.id }
    let wireFormat = WireFormat.native
    private let machine: WebSocketProtocolMachine
    /// Sent in the handshake reply; the member id in every room.
    let clientID: String
    private var channel: String?
    private var member: Member?
    /// Rooms subscribed (or being subscribed) to, so a disconnect leaves every one of them.
    private var rooms: Set<RoomKey> = []
    /// Callbacks of subscribes waiting for their snapshot, per room, in order.
    private var pendingSubscribes: [RoomKey: [Int?]] = [:]
    private var rate: TokenBucket
    private var pingTimer: LoopTimer?
    private var heardSinceTick = true
    private var pingOutstanding = false

    init(connection: TCPConnection, core: ServerCore, webSocket: WebSocketConfiguration,
         deflate: PerMessageDeflateParameters?) {
        self.connection = connection
        self.core = core
        machine = WebSocketProtocolMachine(role: .server, configuration: webSocket, deflate: deflate)
        rate = TokenBucket(ratePerSecond: core.configuration.nativeRatePerSecond, burst: core.configuration.nativeBurst)
        clientID = NativeSession.makeClientID(connectionID: connection.id)
    }

    /// Random letters plus the connection id: unguessable enough for a public id, and unique
    /// within the process without coordination.
    static func makeClientID(connectionID: UInt64) -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        let prefix = String((0..<10).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
        return prefix + String(connectionID, radix: 36)
    }

    func start() {
        let timer = LoopTimer(loop: connection.loop)
        pingTimer = timer
        let interval = core.configuration.webSocketPingIntervalMillis
        timer.start(after: interval, repeating: interval) { [weak self] in self?.pingTick() }
    }

    private func pingTick() {
        guard connection.state == .open else { return }
        if heardSinceTick {
            heardSinceTick = false
            pingOutstanding = false
        } else if pingOutstanding {
            // A whole interval since our ping and not a byte back: the peer is gone.
            connection.close(flush: false)
        } else {
            write(machine.ping())
            pingOutstanding = true
        }
    }

    // MARK: reading

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        heardSinceTick = true
        for action in machine.receive(bytes) {
            guard connection.state == .open else { return }
            switch action {
            case .text(let text):
                handle(Array(text.utf8))
            case .binary(let bytes):
                // The Scaledrone Swift SDK sends its JSON in binary frames.
                handle(bytes)
            case .send(let bytes):
                write(bytes)
            case .closeConnection:
                connection.close()
            case .peerClosed:
                break
            }
        }
    }

    private func handle(_ payload: [UInt8]) {
        switch NativeCommand.parse(payload) {
        case .failure(let failure):
            sendJSON(NativeEncoding.reply(callback: failure.callback, error: failure.message,
                                          clientID: failure.isHandshake ? clientID : nil))
        case .success(let command):
            handle(command)
        }
    }

    private func handle(_ command: NativeCommand) {
        if case .handshake(let channel, let clientData, let callback) = command {
            guard member == nil else {
                sendJSON(NativeEncoding.reply(callback: callback, error: "already handshaken", clientID: clientID))
                return
            }
            self.channel = channel
            member = Member(id: clientID, clientData: clientData)
            sendJSON(NativeEncoding.reply(callback: callback, clientID: clientID))
            return
        }
        guard let member, let channel else {
            sendJSON(NativeEncoding.reply(callback: command.callback, error: "handshake first"))
            return
        }
        switch command {
        case .handshake:
            break
        case .authenticate(_, let callback):
            sendJSON(NativeEncoding.reply(callback: callback, error: "this channel does not use authentication"))
        case .subscribe(let room, let historyCount, let callback):
            let key = RoomKey(channel: channel, room: room)
            if !rooms.contains(key) && rooms.count >= core.configuration.nativeMaxRooms {
                sendJSON(NativeEncoding.reply(callback: callback,
                                              error: "too many rooms (limit \(core.configuration.nativeMaxRooms) per connection)"))
                return
            }
            pendingSubscribes[key, default: []].append(callback)
            do {
                try core.hub.subscribe(sessionID, as: member, to: key, inbox: core.inbox(for: connection.loop),
                                       historyCount: min(historyCount, core.configuration.nativeMaxHistoryCount))
                rooms.insert(key)
            } catch {
                pendingSubscribes[key]?.removeLast()
                sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
            }
        case .unsubscribe(let room, let callback):
            let key = RoomKey(channel: channel, room: room)
            if rooms.remove(key) != nil {
                core.hub.unsubscribe(sessionID, from: key)
            }
            if let callback { sendJSON(NativeEncoding.reply(callback: callback)) }
        case .publish(let room, let message, let callback):
            guard rate.take(nowMillis: core.hub.clock.nowMillis()) else {
                sendJSON(NativeEncoding.reply(callback: callback, error: "rate limit exceeded"))
                return
            }
            do {
                let published = try core.hub.publish(message, to: RoomKey(channel: channel, room: room), from: member)
                if let callback {
                    sendJSON(NativeEncoding.reply(callback: callback) { w in
                        w.key("id"); w.writeString(published.id)
                        w.key("offset"); w.writeInt(Int(published.offset))
                    })
                }
            } catch {
                sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
            }
        }
    }

    // MARK: writing

    private func write(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        connection.write(bytes)
    }

    /// One JSON text frame for this connection alone (compressed when negotiated).
    private func sendJSON(_ json: [UInt8]) {
        guard connection.state == .open else { return }
        write(machine.sendText(String(decoding: json, as: UTF8.self)))
    }

    // MARK: room events

    func receive(_ event: RoomEvent, in room: RoomKey, frame: IOBuffer?) {
        // Between our unsubscribe and the hub's confirmation, the room is already gone for us.
        guard let frame, isSubscribed(to: room), connection.state == .open, machine.state == .open else { return }
        if machine.usesDeflate {
            sendJSON(NativeEncoding.payload(ofServerFrame: frame))
        } else {
            connection.write(frame)
        }
    }

    /// Most sessions are in one room: comparing two keys (short names are inline strings) is
    /// far cheaper than hashing one, and this runs once per delivery.
    @inline(__always) private func isSubscribed(to room: RoomKey) -> Bool {
        rooms.count == 1 ? rooms.first! == room : rooms.contains(room)
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        let callback = pendingSubscribes[snapshot.room]?.isEmpty == false
            ? pendingSubscribes[snapshot.room]!.removeFirst() : nil
        if pendingSubscribes[snapshot.room]?.isEmpty == true { pendingSubscribes[snapshot.room] = nil }
        guard rooms.contains(snapshot.room) else { return }
        // The reply first, so the client knows the room before anything arrives for it.
        if let callback { sendJSON(NativeEncoding.reply(callback: callback)) }
        if snapshot.room.isObservable {
            sendJSON(NativeEncoding.observableMembers(room: snapshot.room, members: snapshot.members))
        }
        for (index, message) in snapshot.history.enumerated() {
            sendJSON(NativeEncoding.historyMessage(message, index: index))
        }
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: closing

    func serverIsStopping() {
        for case .send(let bytes) in machine.close(code: .goingAway, reason: "server shutting down") {
            write(bytes)
        }
        connection.close()
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        pingTimer?.stop()
        pingTimer = nil
        LoopContext.of(connection.loop).localHub.unregister(sessionID)
        for key in rooms { core.hub.unsubscribe(sessionID, from: key) }
        rooms.removeAll()
        core.openConnections.subtract(1, ordering: .relaxed)
    }
}
