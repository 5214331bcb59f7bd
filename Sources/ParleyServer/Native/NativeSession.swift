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
    private var abuse: RateAbuseDetector
    private var idleWatch: IdleWatch?

    init(connection: TCPConnection, core: ServerCore, webSocket: WebSocketConfiguration,
         deflate: PerMessageDeflateParameters?) {
        self.connection = connection
        self.core = core
        machine = WebSocketProtocolMachine(role: .server, configuration: webSocket, deflate: deflate)
        rate = TokenBucket(ratePerSecond: core.configuration.nativeRatePerSecond, burst: core.configuration.nativeBurst)
        clientID = NativeSession.makeClientID(connectionID: connection.id)
        abuse = RateAbuseDetector(ratePerSecond: core.configuration.nativeRatePerSecond, configuration: core.configuration)
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
        let idle = core.configuration.idleTimeoutMillis
        idleWatch = IdleWatch(loop: connection.loop, timeoutMillis: idle) { [weak self] in
            guard let self, self.connection.state == .open else { return }
            self.core.limits.breached(.idleTimeout)
            self.closeWith(.goingAway, reason: "idle timeout (no message for \(LineSession.seconds(idle)) s)")
        }
    }

    /// Sends a close frame and closes once it is out.
    private func closeWith(_ code: WebSocketCloseCode, reason: String) {
        for case .send(let bytes) in machine.close(code: code, reason: reason) { write(bytes) }
        connection.close()
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
                idleWatch?.touch()
                handle(Array(text.utf8))
            case .binary(let bytes):
                idleWatch?.touch()
                // The Scaledrone Swift SDK sends its JSON in binary frames.
                handle(bytes)
            case .send(let bytes):
                write(bytes)
            case .closeConnection:
                if machine.failureCode == .messageTooBig { core.limits.breached(.messageSize) }
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
        case .subscribe(let room, let historyCount, let callback, let since):
            let key = RoomKey(channel: channel, room: room)
            if !rooms.contains(key) && rooms.count >= core.configuration.nativeMaxRooms {
                core.limits.breached(.roomsPerConnection)
                sendJSON(NativeEncoding.reply(callback: callback,
                                              error: "too many rooms (limit \(core.configuration.nativeMaxRooms) per connection)"))
                return
            }
            pendingSubscribes[key, default: []].append(callback)
            do {
                try core.hub.subscribe(sessionID, as: member, to: key, inbox: core.inbox(for: connection.loop),
                                       historyCount: min(historyCount, core.configuration.nativeMaxHistoryCount), since: since)
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
        case .publish(let room, let message, let callback, let messageID):
            let now = core.hub.clock.nowMillis()
            guard rate.take(nowMillis: now) else {
                core.limits.breached(.messageRate)
                sendJSON(NativeEncoding.reply(callback: callback, error: "rate limit exceeded"))
                if abuse.refused(nowMillis: now) {
                    // Sustained abuse: refusing each message costs more than the peer is worth.
                    core.limits.breached(.rateAbuseDisconnect)
                    closeWith(.policyViolation, reason: "rate limit exceeded")
                }
                return
            }
            // The receipt (or, with no callback, only an error) is sent once the message is
            // durable: an acknowledged message is never lost.
            let me = LoopBound(self, on: connection.loop)
            do {
                try core.hub.publish(message, to: RoomKey(channel: channel, room: room), from: member, messageID: messageID) { result in
                    switch result {
                    case .success(let published):
                        guard let callback else { return }
                        me.run { session in
                            session.sendJSON(NativeEncoding.reply(callback: callback) { w in
                                w.key("id"); w.writeString(published.id)
                                w.key("offset"); w.writeInt(Int(published.offset))
                            })
                        }
                    case .failure(let error):
                        me.run { $0.sendJSON(NativeEncoding.reply(callback: callback, error: error.message)) }
                    }
                }
            } catch {
                sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
            }
        case .history(let room, let before, let limit, let callback):
            let me = LoopBound(self, on: connection.loop)
            let limit = min(limit, core.configuration.historyPageLimit)
            core.hub.storedHistory(of: RoomKey(channel: channel, room: room), before: before, limit: limit) { result in
                me.run { session in
                    switch result {
                    case .success(let page): session.sendJSON(NativeEncoding.historyPage(callback: callback, page))
                    case .failure(let error): session.sendJSON(NativeEncoding.reply(callback: callback, error: error.message))
                    }
                }
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
        guard let frame, rooms.contains(room), connection.state == .open, machine.state == .open else { return }
        if machine.usesDeflate {
            sendJSON(NativeEncoding.payload(ofServerFrame: frame))
        } else {
            connection.write(frame)
        }
    }

    func didSubscribe(_ snapshot: SubscribeSnapshot) {
        let callback = pendingSubscribes[snapshot.room]?.isEmpty == false
            ? pendingSubscribes[snapshot.room]!.removeFirst() : nil
        if pendingSubscribes[snapshot.room]?.isEmpty == true { pendingSubscribes[snapshot.room] = nil }
        guard rooms.contains(snapshot.room) else { return }
        if let failure = snapshot.failure {
            rooms.remove(snapshot.room)
            sendJSON(NativeEncoding.reply(callback: callback, error: failure.message))
            return
        }
        // The reply first, so the client knows the room before anything arrives for it.
        if let callback { sendJSON(NativeEncoding.reply(callback: callback)) }
        if snapshot.room.isObservable {
            let limit = core.configuration.maxMembersListed
            if snapshot.members.count > limit { core.limits.breached(.membersListed) }
            sendJSON(NativeEncoding.observableMembers(room: snapshot.room, members: snapshot.members, limit: limit))
        }
        for (index, message) in snapshot.history.enumerated() {
            sendJSON(NativeEncoding.historyMessage(message, index: index))
        }
        // `since`: everything missed, as ordinary pushes, before anything live.
        for message in snapshot.replay {
            sendJSON(NativeEncoding.replayMessage(message))
        }
    }

    func didUnsubscribe(from room: RoomKey) {}

    // MARK: closing

    func serverIsStopping() {
        closeWith(.goingAway, reason: "server shutting down")
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        pingTimer?.stop()
        pingTimer = nil
        idleWatch?.stop()
        idleWatch = nil
        LoopContext.of(connection.loop).localHub.unregister(sessionID)
        for key in rooms { core.hub.unsubscribe(sessionID, from: key) }
        rooms.removeAll()
        core.release(connection)
    }
}
