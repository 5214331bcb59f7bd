import ParleyCore
import ParleyIO

/// One connection to one Redis server, living on one event loop. Loop thread only: every
/// method must be called on ``loop``, and every completion and event runs there. Other
/// threads use ``RedisClient`` (which owns one of these per loop) or ``RedisSubscriber``.
///
/// - Commands are pipelined: each is written at once, without waiting for earlier replies,
///   and replies are matched to commands in order (FIFO).
/// - Commands sent while connecting wait (bounded by
///   ``RedisConfiguration/maxPendingCommands``) and go out when the connection is ready;
///   commands sent while it is down fail at once with ``RedisError/Code/connection``.
/// - Each command has a timeout. A command that times out on a connection that has received
///   nothing since the command was written marks the connection unresponsive: it is closed,
///   reported down, and reconnected.
/// - After connecting it sends `HELLO 3` (with `AUTH`/`SETNAME`), falling back to RESP2 with
///   `AUTH` when the server does not know `HELLO`, then `SELECT`s the database.
/// - A lost connection reconnects by itself with exponential backoff and jitter; every
///   state change is reported through ``eventHandler``.
public final class RedisConnection {
    /// What the connection is for.
    public enum Mode: Sendable {
        /// Request/reply commands.
        case commands
        /// Pub/sub: replies to `(S)SUBSCRIBE` are confirmations and messages are routed to
        /// the subscriber (see ``RedisSubscriber``).
        case subscriber
    }

    public typealias Completion = (Result<RedisValue, RedisError>) -> Void

    public let loop: EventLoop
    public let endpoint: RedisEndpoint
    public let configuration: RedisConfiguration
    public let mode: Mode
    /// Where the connection stands.
    public private(set) var state: RedisConnectionState = .idle
    /// 3 or 2 once the handshake has run (0 before).
    public private(set) var protocolVersion = 0
    /// The server's version from `HELLO` (nil under RESP2).
    public private(set) var serverVersion: String?
    /// Receives state changes, on the loop.
    public var eventHandler: ((RedisConnectionEvent) -> Void)?

    /// Pub/sub traffic that is not a reply (subscriber mode, or RESP3 pushes).
    enum PubSubEvent {
        case message(sharded: Bool, channel: [UInt8], payload: [UInt8])
        /// A (un)subscribe confirmation nobody asked for: Redis dropped a subscription itself
        /// (a sharded channel's slot moved to another node).
        case unsolicited(kind: String, channel: [UInt8])
    }

    /// What the reply to a written command looks like.
    enum Expectation: Equatable {
        case reply
        /// A `subscribe`/`ssubscribe`/`unsubscribe`/`sunsubscribe` confirmation for `channel`.
        case confirmation(kind: String, channel: [UInt8])
        /// `PING` (`+PONG`, or `["pong", ""]` on a RESP2 connection in subscribe mode).
        case ping
    }

    var pubSubHandler: ((PubSubEvent) -> Void)?
    /// Runs after the handshake on every (re)connect, before the connection is ready; it may
    /// send with ``sendDuringSetup(_:expectation:completion:)`` and must call `done` once.
    var sessionSetup: ((_ done: @escaping (RedisError?) -> Void) -> Void)?

    private struct Pending {
        var command: RedisCommand?
        var completion: Completion?
        var expectation: Expectation
        var deadline: UInt64
        var sentAt: UInt64 = 0
    }

    private var tcp: TCPConnection?
    private var decoder: RESPDecoder
    private var encoder = RESPCommandEncoder()
    private var waiting = FIFO<Pending>()
    private var inFlight = FIFO<Pending>()
    /// Bumped whenever the socket is replaced or dropped: callbacks of an older socket or
    /// attempt see a different number and do nothing.
    private var generation = 0
    private var attempt = 0
    private var hasBeenReady = false
    private var pingInFlight = false
    private var ticker: LoopTimer?
    private var backoffTimer: LoopTimer?
    private var connectTimer: LoopTimer?
    private var lastReadAt: UInt64 = 0
    private var lastWriteAt: UInt64 = 0
    private var earliestDeadline: UInt64 = .max

    /// A connection that starts with ``start()``. Any thread; use it on `loop` from then on.
    public init(endpoint: RedisEndpoint, configuration: RedisConfiguration = RedisConfiguration(),
                loop: EventLoop, mode: Mode = .commands) {
        self.endpoint = endpoint
        self.configuration = configuration
        self.loop = loop
        self.mode = mode
        decoder = RESPDecoder(limits: configuration.decoderLimits)
    }

    deinit {
        tcp?.handler = nil
        tcp?.close(flush: false)
    }

    /// Commands waiting to be written or for their replies.
    public var pendingCommandCount: Int { waiting.count + inFlight.count }

    /// Starts connecting (idempotent).
    public func start() {
        loop.assertInEventLoop()
        guard case .idle = state else { return }
        let tick = UInt64(max(10, min(100, configuration.commandTimeoutMillis / 10)))
        ticker = LoopTimer(loop: loop)
        ticker?.start(after: tick, repeating: tick) { [weak self] in self?.tick() }
        backoffTimer = LoopTimer(loop: loop)
        connectTimer = LoopTimer(loop: loop)
        connect()
    }

    /// Sends `command`; `completion` gets the reply (a Redis error reply as
    /// ``RedisError/Code/server``), or why there is none. It may run before `send` returns
    /// (the connection is down, closed, or its queue is full).
    public func send(_ command: RedisCommand, completion: @escaping Completion) {
        submit(command, expectation: .reply, completion: completion)
    }

    /// Sends `commands` back to back on this connection, nothing else between them (for
    /// `MULTI`…`EXEC`, or `ASKING` + command); `completion` gets one result per command.
    public func send(batch commands: [RedisCommand], completion: @escaping ([Result<RedisValue, RedisError>]) -> Void) {
        loop.assertInEventLoop()
        guard !commands.isEmpty else { completion([]); return }
        if case .idle = state { start() }
        if let refusal = refusal(adding: commands.count) {
            completion(Array(repeating: .failure(refusal), count: commands.count))
            return
        }
        let collector = BatchCollector(count: commands.count, completion: completion)
        let now = monotonicMillis()
        var entries: [Pending] = []
        for (index, command) in commands.enumerated() {
            entries.append(Pending(command: command, completion: { collector.set(index, $0) }, expectation: .reply,
                                   deadline: deadline(for: command, now: now)))
        }
        if case .ready = state {
            write(commands)
            for var entry in entries {
                entry.command = nil
                entry.sentAt = now
                inFlight.append(entry)
            }
        } else {
            for entry in entries { waiting.append(entry) }
        }
    }

    /// Closes the connection for good; unanswered commands fail with
    /// ``RedisError/Code/closed``.
    public func close() {
        loop.assertInEventLoop()
        if case .closed = state { return }
        generation += 1
        state = .closed
        ticker?.stop()
        backoffTimer?.stop()
        connectTimer?.stop()
        if let tcp {
            tcp.handler = nil
            tcp.close(flush: true)
        }
        tcp = nil
        let error = RedisError(.closed, "the Redis connection to \(endpoint.address) was closed")
        failAll(error, error)
    }

    // MARK: internal sends

    func submit(_ command: RedisCommand, expectation: Expectation, completion: Completion?) {
        loop.assertInEventLoop()
        if case .idle = state { start() }
        if let refusal = refusal(adding: 1) {
            completion?(.failure(refusal))
            return
        }
        let now = monotonicMillis()
        var entry = Pending(command: command, completion: completion, expectation: expectation,
                            deadline: deadline(for: command, now: now))
        if case .ready = state {
            write(CollectionOfOne(command))
            entry.command = nil
            entry.sentAt = now
            inFlight.append(entry)
        } else {
            waiting.append(entry)
        }
    }

    /// Writes at once during ``sessionSetup`` (the connection is not ready yet, so ``send``
    /// would queue behind the setup).
    func sendDuringSetup(_ command: RedisCommand, expectation: Expectation = .reply, completion: @escaping Completion) {
        loop.assertInEventLoop()
        guard tcp != nil else {
            completion(.failure(RedisError(.connection, "not connected to Redis at \(endpoint.address)")))
            return
        }
        let now = monotonicMillis()
        write(CollectionOfOne(command))
        inFlight.append(Pending(command: nil, completion: completion, expectation: expectation,
                                deadline: deadline(for: command, now: now), sentAt: now))
    }

    private func refusal(adding count: Int) -> RedisError? {
        switch state {
        case .closed:
            return RedisError(.closed, "the Redis connection to \(endpoint.address) is closed")
        case .down(let error):
            return RedisError(.connection, "Redis at \(endpoint.address) is unavailable: \(error.message)")
        default:
            if pendingCommandCount + count > configuration.maxPendingCommands {
                return RedisError(.queueFull, "more than \(configuration.maxPendingCommands) Redis commands waiting on \(endpoint.address)")
            }
            return nil
        }
    }

    private func deadline(for command: RedisCommand, now: UInt64) -> UInt64 {
        let timeout = UInt64(max(1, command.timeoutMillis ?? configuration.commandTimeoutMillis))
        let deadline = now + timeout
        earliestDeadline = min(earliestDeadline, deadline)
        return deadline
    }

    private func write(_ commands: some Sequence<RedisCommand>) {
        guard let tcp else { return }
        encoder.clear()
        for command in commands { encoder.encode(command) }
        tcp.write(encoder.buffer)
        lastWriteAt = monotonicMillis()
    }

    // MARK: connecting

    private func connect() {
        switch state {
        case .idle, .down: break
        default: return
        }
        generation += 1
        let generation = self.generation
        state = .connecting
        eventHandler?(.connecting)
        connectTimer?.start(after: UInt64(max(1, configuration.connectTimeoutMillis))) { [weak self] in
            guard let self, generation == self.generation, self.tcp == nil else { return }
            self.connectionFailed(RedisError(.connection,
                "connecting to Redis at \(self.endpoint.address) timed out after \(self.configuration.connectTimeoutMillis) ms"))
        }
        let loopBox = LoopBound(self, on: loop)
        HostResolver.resolve(endpoint.host) { result in
            let result = result.mapError { RedisError(.connection, "Redis: \($0.message)") }
            loopBox.run { connection in connection.resolved(result, generation: generation) }
        }
    }

    private func resolved(_ result: Result<String, RedisError>, generation: Int) {
        guard generation == self.generation else { return }
        switch result {
        case .failure(let error):
            connectionFailed(error)
        case .success(let address):
            loop.connect(host: address, port: endpoint.port) { [weak self] result in
                // A stale socket is left without a handler, so ParleyIO closes it.
                guard let self, generation == self.generation, case .connecting = self.state else { return }
                switch result {
                case .failure(let error):
                    self.connectionFailed(RedisError(.connection, "cannot connect to Redis at \(self.endpoint.address): \(error.message)"))
                case .success(let connection):
                    connection.maxQueuedBytes = self.configuration.maxWriteQueueBytes
                    connection.handler = SocketHandler(owner: self, generation: generation)
                    if self.endpoint.usesTLS {
                        guard let tls = self.configuration.tls else {
                            connection.handler = nil
                            connection.close(flush: false)
                            self.connectionFailed(RedisError(.connection, "rediss://\(self.endpoint.address) needs TLS settings (a CA file)"))
                            return
                        }
                        do throws(IOError) {
                            // The handshake's commands wait inside the TLS session until it is done.
                            try connection.startTLS(tls.context, serverName: tls.serverName ?? self.endpoint.host)
                        } catch {
                            connection.handler = nil
                            connection.close(flush: false)
                            self.connectionFailed(RedisError(.connection, "TLS to Redis at \(self.endpoint.address): \(error.message)"))
                            return
                        }
                    }
                    self.tcp = connection
                    self.connectTimer?.stop()
                    self.lastReadAt = monotonicMillis()
                    self.handshake(generation)
                }
            }
        }
    }

    private func handshake(_ generation: Int) {
        guard configuration.protocolPreference == .resp3IfAvailable else {
            authenticateRESP2(generation)
            return
        }
        var arguments: [RedisArgument] = ["HELLO", "3"]
        if let password = endpoint.password {
            arguments += ["AUTH", .string(endpoint.username ?? "default"), .string(password)]
        }
        if let name = configuration.clientName { arguments += ["SETNAME", .string(name)] }
        setupStep(RedisCommand(arguments), generation) { connection, result in
            switch result {
            case .success(let reply):
                connection.protocolVersion = 3
                connection.serverVersion = reply.pairs?.first { $0.key.string == "version" }?.value.string
                connection.selectDatabase(generation)
            case .failure(let error) where error.serverCode == "NOPROTO" || error.message.lowercased().contains("unknown command"):
                connection.authenticateRESP2(generation)
            case .failure(let error):
                connection.connectionFailed(error)
            }
        }
    }

    private func authenticateRESP2(_ generation: Int) {
        protocolVersion = 2
        guard let password = endpoint.password else {
            setNameRESP2(generation)
            return
        }
        let arguments: [RedisArgument] = endpoint.username.map { ["AUTH", .string($0), .string(password)] } ?? ["AUTH", .string(password)]
        setupStep(RedisCommand(arguments), generation) { connection, result in
            switch result {
            case .success: connection.setNameRESP2(generation)
            case .failure(let error): connection.connectionFailed(error)
            }
        }
    }

    private func setNameRESP2(_ generation: Int) {
        guard let name = configuration.clientName else {
            selectDatabase(generation)
            return
        }
        // A name is cosmetic: a server that refuses it is still usable.
        setupStep(RedisCommand("CLIENT", "SETNAME", .string(name)), generation) { connection, _ in
            connection.selectDatabase(generation)
        }
    }

    private func selectDatabase(_ generation: Int) {
        guard endpoint.database != 0 else {
            loadScripts(generation)
            return
        }
        setupStep(RedisCommand("SELECT", .integer(Int64(endpoint.database))), generation) { connection, result in
            switch result {
            case .success: connection.loadScripts(generation)
            case .failure(let error): connection.connectionFailed(error)
            }
        }
    }

    /// Loads ``RedisConfiguration/scriptsToLoad`` on a command connection, then runs the
    /// session setup. A refusal (a read-only replica, an ACL) is not fatal: `EVALSHA` falls
    /// back to `EVAL`.
    private func loadScripts(_ generation: Int, from index: Int = 0) {
        let scripts = configuration.scriptsToLoad
        guard mode == .commands, index < scripts.count else {
            runSessionSetup(generation)
            return
        }
        setupStep(RedisCommand("SCRIPT", "LOAD", .string(scripts[index].source)), generation) { connection, _ in
            connection.loadScripts(generation, from: index + 1)
        }
    }

    private func runSessionSetup(_ generation: Int) {
        guard let sessionSetup else {
            becomeReady()
            return
        }
        sessionSetup { [weak self] error in
            guard let self, generation == self.generation else { return }
            if let error { self.connectionFailed(error) } else { self.becomeReady() }
        }
    }

    /// One handshake command whose continuation runs only if this attempt is still current.
    private func setupStep(_ command: RedisCommand, _ generation: Int,
                           _ next: @escaping (RedisConnection, Result<RedisValue, RedisError>) -> Void) {
        sendDuringSetup(command) { [weak self] result in
            guard let self, generation == self.generation else { return }
            next(self, result)
        }
    }

    private func becomeReady() {
        state = .ready
        attempt = 0
        let now = monotonicMillis()
        var commands: [RedisCommand] = []
        var flushed: [Pending] = []
        while var entry = waiting.popFirst() {
            guard entry.completion != nil || entry.expectation != .reply, let command = entry.command else { continue }
            commands.append(command)
            entry.command = nil
            entry.sentAt = now
            flushed.append(entry)
        }
        if !commands.isEmpty { write(commands) }
        for entry in flushed { inFlight.append(entry) }
        let reconnected = hasBeenReady
        hasBeenReady = true
        eventHandler?(.ready(reconnected: reconnected))
    }

    /// The attempt failed or the connection broke: fail what waits, report down, back off.
    private func connectionFailed(_ error: RedisError) {
        let wasReady: Bool
        switch state {
        case .ready: wasReady = true
        case .connecting: wasReady = false
        default: return
        }
        generation += 1
        connectTimer?.stop()
        if let tcp {
            tcp.handler = nil
            tcp.close(flush: false)
        }
        tcp = nil
        decoder = RESPDecoder(limits: configuration.decoderLimits)
        pingInFlight = false
        let down = wasReady
            ? RedisError(error.code == .timeout ? .timeout : .connection, "lost the connection to Redis at \(endpoint.address): \(error.message)")
            : error
        state = .down(down)
        scheduleReconnect()
        eventHandler?(.down(down))
        let lost = RedisError(.connection, "the connection to Redis at \(endpoint.address) broke before the reply (the command may have run): \(error.message)")
        failAll(lost, RedisError(.connection, "Redis at \(endpoint.address) is unavailable: \(error.message)"))
    }

    private func failAll(_ inFlightError: RedisError, _ waitingError: RedisError) {
        let inFlight = self.inFlight.removeAll()
        let waiting = self.waiting.removeAll()
        earliestDeadline = .max
        for entry in inFlight { entry.completion?(.failure(inFlightError)) }
        for entry in waiting { entry.completion?(.failure(waitingError)) }
    }

    private func scheduleReconnect() {
        attempt += 1
        let initial = max(1, configuration.reconnectInitialDelayMillis)
        let cap = max(initial, configuration.reconnectMaxDelayMillis)
        let base = min(cap, initial << min(attempt - 1, 20))
        let delay = base / 2 + Int.random(in: 0...max(0, base - base / 2))
        backoffTimer?.start(after: UInt64(max(1, delay))) { [weak self] in self?.connect() }
    }

    // MARK: timeouts and health

    private func tick() {
        let now = monotonicMillis()
        var expired: [Completion] = []
        var unresponsive = false
        if now >= earliestDeadline {
            var earliest = UInt64.max
            let lastRead = lastReadAt
            waiting.updateEach { entry in
                guard entry.completion != nil else { return }
                if entry.deadline <= now {
                    expired.append(entry.completion!)
                    entry.completion = nil
                } else {
                    earliest = min(earliest, entry.deadline)
                }
            }
            inFlight.updateEach { entry in
                guard entry.completion != nil || entry.expectation == .ping else { return }
                if entry.deadline <= now {
                    if let completion = entry.completion { expired.append(completion) }
                    entry.completion = nil
                    if lastRead < entry.sentAt { unresponsive = true }
                } else {
                    earliest = min(earliest, entry.deadline)
                }
            }
            earliestDeadline = earliest
        }
        let generation = self.generation
        if !expired.isEmpty {
            let error = RedisError(.timeout, "no reply from Redis at \(endpoint.address) in time")
            for completion in expired { completion(.failure(error)) }
        }
        if unresponsive, generation == self.generation {
            connectionFailed(RedisError(.timeout, "Redis sent nothing for \(now - lastReadAt) ms"))
            return
        }
        if case .ready = state, configuration.pingIntervalMillis > 0, !pingInFlight,
           now >= max(lastReadAt, lastWriteAt) + UInt64(configuration.pingIntervalMillis) {
            pingInFlight = true
            submit(RedisCommand("PING"), expectation: .ping, completion: nil)
        }
    }

    // MARK: reading

    fileprivate func didRead(_ bytes: UnsafeRawBufferPointer, generation: Int) {
        guard generation == self.generation else { return }
        lastReadAt = monotonicMillis()
        decoder.feed(bytes)
        while true {
            let value: RedisValue?
            do {
                value = try decoder.next()
            } catch {
                connectionFailed(error)
                return
            }
            guard let value else { return }
            dispatch(value)
            // A completion may have closed or reset the connection.
            guard generation == self.generation else { return }
        }
    }

    fileprivate func didClose(_ reason: ConnectionCloseReason, generation: Int) {
        guard generation == self.generation else { return }
        tcp = nil
        let text: String
        switch reason {
        case .peerClosed: text = "Redis closed the connection"
        case .local: text = "closed locally"
        case .writeQueueOverflow: text = "more than \(configuration.maxWriteQueueBytes) bytes waiting to be written"
        case .shutdown: text = "the event loop is shutting down"
        case .error(let error): text = error.message
        }
        connectionFailed(RedisError(.connection, text))
    }

    private func dispatch(_ value: RedisValue) {
        switch value {
        case .push(let items):
            if handlePubSub(items) { return }
            // Other pushes (e.g. client-side caching invalidations) are not replies.
            return
        case .array(let items) where mode == .subscriber:
            if handlePubSub(items) { return }
        default:
            break
        }
        completeHead(with: value)
    }

    /// Routes a pub/sub message or confirmation; false when `items` is neither.
    private func handlePubSub(_ items: [RedisValue]) -> Bool {
        guard let first = items.first, case .bulkString(let kindBytes) = first.withoutAttributes,
              kindBytes.count <= 12 else { return false }
        let kind = String(decoding: kindBytes, as: UTF8.self).lowercased()
        switch kind {
        case "message", "smessage":
            guard items.count == 3, let channel = items[1].bytes else { return false }
            pubSubHandler?(.message(sharded: kind == "smessage", channel: channel, payload: items[2].bytes ?? []))
            return true
        case "pmessage":
            // Parley does not pattern-subscribe; nothing to deliver it to.
            return items.count == 4
        case "subscribe", "ssubscribe", "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe":
            guard items.count == 3 else { return false }
            let channel = items[1].bytes ?? []
            if let head = inFlight.first, head.expectation == .confirmation(kind: kind, channel: channel) {
                completeHead(with: .array(items))
            } else {
                pubSubHandler?(.unsolicited(kind: kind, channel: channel))
            }
            return true
        case "pong":
            if let head = inFlight.first, head.expectation == .ping {
                completeHead(with: .simpleString("PONG"))
                return true
            }
            return false
        default:
            return false
        }
    }

    private func completeHead(with value: RedisValue) {
        guard let entry = inFlight.popFirst() else {
            connectionFailed(RedisError(.protocolViolation, "Redis sent a reply nobody asked for: \(value)"))
            return
        }
        if entry.expectation == .ping { pingInFlight = false }
        guard let completion = entry.completion else { return }
        let value = value.withoutAttributes
        if case .error(let message) = value {
            completion(.failure(RedisError(.server, message)))
        } else {
            completion(.success(value))
        }
    }
}

/// Forwards socket events to the connection of one attempt (weakly: the owner of the
/// `RedisConnection` decides its life, not its socket).
private final class SocketHandler: ConnectionHandler {
    weak var owner: RedisConnection?
    let generation: Int

    init(owner: RedisConnection, generation: Int) {
        self.owner = owner
        self.generation = generation
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        owner?.didRead(bytes, generation: generation)
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        owner?.didClose(reason, generation: generation)
    }
}

/// Gathers a batch's replies and completes once, with all of them.
final class BatchCollector {
    private var results: [Result<RedisValue, RedisError>?]
    private var remaining: Int
    private let completion: ([Result<RedisValue, RedisError>]) -> Void

    init(count: Int, completion: @escaping ([Result<RedisValue, RedisError>]) -> Void) {
        results = Array(repeating: nil, count: count)
        remaining = count
        self.completion = completion
    }

    func set(_ index: Int, _ result: Result<RedisValue, RedisError>) {
        guard results[index] == nil else { return }
        results[index] = result
        remaining -= 1
        if remaining == 0 { completion(results.map { $0! }) }
    }
}
