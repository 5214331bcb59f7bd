import Dispatch
import Foundation
import ParleyCore
import ParleyLog
import Synchronization

/// The settings push runs with (docs/push.md).
struct PushSettings: Sendable {
    var vapid: P256Key?
    var apns: APNsProvider?
    var fcm: FCMProvider?
    /// Whether any provider is configured (push is on).
    var isOn: Bool { vapid != nil || apns != nil || fcm != nil }
    /// The providers that are on, by name.
    var providers: [String] {
        [vapid.map { _ in "webpush" }, apns.map { _ in "apns" }, fcm.map { _ in "fcm" }].compactMap { $0 }
    }
    var vapidSubject: String
    var webPushEndpoints: [String]
    var caFile: String?
    var coalesceMillis: Int64
    var maxQueued: Int
    var perUserPerMinute: Int
    var maxRoomUsers: Int
    var preview: Bool
    var mentionsOverrideMutes: Bool

    init(_ configuration: ServerConfiguration) throws(StartupError) {
        switch (configuration.vapidPublicKey, configuration.vapidPrivateKey) {
        case (nil, nil):
            vapid = nil
        case (let publicKey?, let privateKey?):
            guard let pub = Base64URL.decode(publicKey), let priv = Base64URL.decode(privateKey) else {
                throw StartupError(description: "the VAPID keys must be base64url (make a pair with `parley vapid-keys`)")
            }
            let key: P256Key
            do {
                key = try P256Key(publicKey: pub, privateKey: priv)
            } catch {
                throw StartupError(description: "the VAPID keys are not a P-256 key pair: \(error)")
            }
            guard key.isConsistentPair else { throw StartupError(description: "the VAPID public key is not the private key's") }
            vapid = key
        default:
            throw StartupError(description: "set both --vapid-public-key and --vapid-private-key, or neither")
        }
        switch (configuration.apnsKeyFile, configuration.apnsKeyID, configuration.apnsTeamID) {
        case (nil, nil, nil):
            apns = nil
        case (let file?, let keyID?, let teamID?):
            let pem: String
            do { pem = try String(contentsOfFile: file, encoding: .utf8) } catch {
                throw StartupError(description: "cannot read the APNs key \(file): \(error.localizedDescription)")
            }
            let key: P256Key
            do { key = try P256Key(pem: pem) } catch { throw StartupError(description: "the APNs key \(file) is not a P-256 .p8 key: \(error)") }
            apns = APNsProvider(APNsProvider.Settings(key: key, keyID: keyID, teamID: teamID, endpoint: configuration.apnsEndpoint,
                                                      sandboxEndpoint: configuration.apnsSandboxEndpoint))
        default:
            throw StartupError(description: "APNs needs --apns-key-file, --apns-key-id and --apns-team-id together")
        }
        if let file = configuration.fcmServiceAccountFile {
            let bytes: [UInt8]
            do { bytes = Array(try Data(contentsOf: URL(fileURLWithPath: file))) } catch {
                throw StartupError(description: "cannot read the FCM service account \(file): \(error.localizedDescription)")
            }
            guard bytes.count <= 64 << 10 else { throw StartupError(description: "the FCM service account \(file) is larger than 64 KiB") }
            fcm = FCMProvider(FCMProvider.Settings(account: try FCMProvider.ServiceAccount(json: bytes), endpoint: configuration.fcmEndpoint,
                                                   tokenEndpoint: configuration.fcmTokenEndpoint))
        } else {
            fcm = nil
        }
        vapidSubject = configuration.vapidSubject
        webPushEndpoints = configuration.webPushEndpoints
        caFile = configuration.pushCAFile
        coalesceMillis = Int64(configuration.pushCoalesceMillis)
        maxQueued = configuration.pushMaxQueued
        perUserPerMinute = configuration.pushPerUserPerMinute
        maxRoomUsers = configuration.pushMaxRoomUsers
        preview = configuration.pushPreview
        mentionsOverrideMutes = configuration.pushMentionsOverrideMutes
    }

    /// Why this server does not take `device` (its provider is off, or a Web Push endpoint is
    /// not an allowed push service), or nil.
    func refusal(for device: PushDevice) -> (status: Int, message: String)? {
        switch device.platform {
        case .apns where apns == nil: return (501, "APNs is not configured on this server (docs/push.md)")
        case .fcm where fcm == nil: return (501, "FCM is not configured on this server (docs/push.md)")
        case .webpush where vapid == nil: return (501, "Web Push is not configured on this server (no VAPID keys)")
        case .webpush where !allows(endpoint: device.token): return (403, "this server does not send to that push service (see --webpush-endpoints)")
        default: return nil
        }
    }

    /// Whether `endpoint` names an allowed push service (so a subscription cannot make the
    /// server send requests anywhere else).
    func allows(endpoint: String) -> Bool {
        webPushEndpoints.contains { prefix in
            guard let star = prefix.range(of: "://*.") else { return endpoint.hasPrefix(prefix) }
            // https://*.notify.windows.com/ : any host ending in .notify.windows.com
            let scheme = prefix[..<star.lowerBound] + "://", suffix = "." + prefix[star.upperBound...]
            guard endpoint.hasPrefix(scheme) else { return false }
            let rest = endpoint.dropFirst(scheme.count)
            guard let slash = rest.firstIndex(of: "/") else { return false }
            let host = rest[..<slash]
            return host.hasSuffix(suffix.dropLast()) && !host.contains("@") && (rest[slash...] + "/").hasPrefix("/")
        }
    }
}

/// Push notifications for users who are away (docs/push.md): a stored message is planned on
/// the node that published it (so once in a cluster), queued per user and room (coalesced,
/// durably), and sent when due to each of the user's devices, unless they read the room or
/// came back meanwhile. One serial queue does all of it, off the event loops: the store and
/// the HTTP calls block there.
final class PushService: Sendable {
    let store: any PushStore
    let settings: PushSettings
    private let hub: Hub
    private let reads: any ReadStateStore
    private let logger: Logger
    private let queue = DispatchQueue(label: "parley-push")
    /// Set by ``stop()``: the 200 ms ticker that sends what is due ends.
    private let stopped = Atomic<Bool>(false)
    /// Plans waiting for the queue; past ``maxPlansWaiting`` a message is not pushed (counted).
    private let plansWaiting = Atomic<Int>(0)
    static let maxPlansWaiting = 10_000
    /// The newest offset planned per room: a retried publish (idempotent, the same message
    /// again) is not pushed twice.
    private let planned = Mutex<[RoomKey: Int64]>([:])
    /// Each user's pushes per minute (`push.max_per_user_per_minute`): in a cluster the
    /// budget every node shares (Redis), so more nodes do not mean more pushes.
    private let budgets: any BudgetStore
    let counters = PushCounters()

    init(store: any PushStore, settings: PushSettings, hub: Hub, reads: any ReadStateStore, logger: Logger,
         budgets: any BudgetStore = InMemoryBudgetStore()) {
        self.budgets = budgets
        self.store = store
        self.settings = settings
        self.hub = hub
        self.reads = reads
        self.logger = logger
        DetachedThread.start(name: "parley-push-tick") { [weak self] in
            while true {
                usleep(200_000)
                guard let service = self, !service.stopped.load(ordering: .relaxed) else { return }
                service.queue.async { service.deliverDue() }
            }
        }
        hub.observeStored { [weak self] message in self?.stored(message) }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        queue.sync {}
    }

    /// Runs `body` on the push queue; `completion` gets its result there.
    func perform<T: Sendable>(_ body: @escaping @Sendable () throws(ParleyError) -> T,
                              completion: @escaping @Sendable (Result<T, ParleyError>) -> Void) {
        queue.async {
            do throws(ParleyError) { completion(.success(try body())) } catch { completion(.failure(error)) }
        }
    }

    // MARK: planning

    private func stored(_ message: Message) {
        guard !message.isAction, !message.isEphemeral, message.offset > 0, !ReservedRoom.isReserved(message.room.room) else { return }
        let fresh = planned.withLock { planned -> Bool in
            guard (planned[message.room] ?? 0) < message.offset else { return false }
            if planned.count > 100_000 { planned.removeAll() }
            planned[message.room] = message.offset
            return true
        }
        guard fresh else { return }
        guard plansWaiting.add(1, ordering: .relaxed).newValue <= Self.maxPlansWaiting else {
            plansWaiting.subtract(1, ordering: .relaxed)
            counters.dropped.add(1, ordering: .relaxed)
            return
        }
        queue.async { [self] in
            plansWaiting.subtract(1, ordering: .relaxed)
            do throws(ParleyError) { try plan(message) } catch {
                logger.warn("push: a message could not be planned", metadata: ["error": .string(error.message)])
            }
        }
    }

    /// Waits on the push queue for a completion-based call.
    private func wait<T: Sendable>(_ call: (@escaping @Sendable (Result<T, ParleyError>) -> Void) -> Void) throws(ParleyError) -> T {
        let box = Mutex<Result<T, ParleyError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        call { result in
            box.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + .seconds(10)) == .success, let result = box.withLock({ $0 }) else {
            throw ParleyError(.unavailable, "a store did not answer within 10 s")
        }
        return try result.get()
    }

    private func plan(_ message: Message) throws(ParleyError) {
        let room = message.room
        let users: [String]
        if let direct = DirectRoom.users(of: room.room) {
            users = direct
        } else {
            users = try wait { reads.users(of: room, limit: settings.maxRoomUsers, completion: $0) }
        }
        let sender = message.sender?.user
        let candidates = users.filter { $0 != sender }
        guard !candidates.isEmpty else { return }
        let reachable = try store.usersWithDevices(candidates, in: room.channel)
        guard !reachable.isEmpty else { return }
        let connected = Set(try wait { hub.users(of: room, limit: Hub.maxMembersPerRoomQuery, completion: $0) }.users.map(\.user))
        let now = hub.clock.nowMillis()
        var mutes: [String: [PushMute]] = [:], names: [String: String] = [:]
        for user in reachable {
            let list = try store.mutes(of: user, in: room.channel, nowMillis: now)
            guard !list.isEmpty else { continue }
            mutes[user] = list
            names[user] = try wait { reads.mark(of: user, in: room, completion: $0) }?.name
        }
        let recipients = PushRules.recipients(of: message, users: candidates.filter(reachable.contains), connected: connected,
                                              mutes: mutes, nowMillis: now, mentionsOverrideMutes: settings.mentionsOverrideMutes,
                                              names: names)
        for user in recipients {
            let job = PushJob(channel: room.channel, user: user, room: room.room, count: 1, lastOffset: message.offset,
                              dueMillis: now + settings.coalesceMillis)
            if try store.enqueue(job, maxQueued: settings.maxQueued) {
                counters.enqueued.add(1, ordering: .relaxed)
            } else {
                counters.dropped.add(1, ordering: .relaxed)
                logger.warn("push: the queue is full; a push was dropped", metadata: ["limit": .int(settings.maxQueued)])
            }
        }
    }

    // MARK: delivering

    private func deliverDue() {
        let now = hub.clock.nowMillis()
        // The queue's length, read here (on the push queue, where the store may block) about
        // once a second, for /metrics and the admin dashboard, which must not block.
        if now - counters.queuedReadMillis.load(ordering: .relaxed) >= 1_000, let queued = try? store.queued() {
            counters.queued.store(queued, ordering: .relaxed)
            counters.queuedReadMillis.store(now, ordering: .relaxed)
        }
        let jobs: [PushJob]
        do { jobs = try store.due(nowMillis: now, limit: 100) } catch { return }
        for job in jobs {
            do throws(ParleyError) { try deliver(job, now: now) } catch {
                logger.warn("push: a due push failed", metadata: ["error": .string(error.message)])
                try? store.reschedule(job.id, dueMillis: now + 30_000, attempts: job.attempts + 1)
            }
        }
    }

    /// Most messages of a coalesced push read back when it is sent (to see edits and deletes).
    static let messagesRead = 50

    /// Most tries of one push; backoff doubles from 2 s.
    static let maxAttempts = 6

    private func deliver(_ taken: PushJob, now: Int64) throws(ParleyError) {
        // A batch is worked through one job after another, and a send may take its whole
        // timeout: by its turn a job's lease may have run out and another node taken it. So
        // the lease is renewed first and before each device (a send takes at most
        // `OutgoingHTTP`'s 10 s, a lease lasts 30): only the taker holding it sends a push.
        guard var job = try store.renew(taken, nowMillis: hub.clock.nowMillis()) else {
            counters.lostLeases.add(1, ordering: .relaxed)
            return
        }
        let room = RoomKey(channel: job.channel, room: job.room)
        // Read on another device meanwhile, or back in the room: nothing to tell.
        if let mark = try wait({ reads.mark(of: job.user, in: room, completion: $0) }), mark.offset >= job.lastOffset {
            return try store.complete(job)
        }
        if try wait({ hub.users(of: room, limit: Hub.maxMembersPerRoomQuery, completion: $0) }).users.contains(where: { $0.user == job.user }) {
            return try store.complete(job)
        }
        guard try budgets.take(1, key: "push:" + job.channel + "/" + job.user, allowance: settings.perUserPerMinute, periodMillis: 60_000,
                               nowMillis: now) else {
            // Over the user's rate: it waits and gathers what comes meanwhile.
            return try store.reschedule(job.id, dueMillis: now + 60_000 / Int64(settings.perUserPerMinute), attempts: job.attempts)
        }
        // The messages as they are now: an edit before delivery is what the push shows, a
        // delete withdraws that message (and the push, when nothing else is left).
        let page = try wait {
            hub.store.messages(in: room, before: job.lastOffset + 1, limit: min(max(job.count, 1), Self.messagesRead), maxBytes: 256 << 10,
                               completion: $0)
        }
        guard let (last, count) = PushRules.pending(page.messages, count: job.count, for: job.user) else { return try store.complete(job) }
        let reader = InboxReader(messages: hub.store, reads: reads)
        let inbox = try wait { reader.inbox(of: job.user, name: "", in: job.channel, limit: InboxReader.maxPage, completion: $0) }
        let badge = inbox.conversations.reduce(0) { $0 + $1.unread.unread }
        let content = PushRules.content(last: last, count: count, badge: max(badge, 1), preview: settings.preview)
        var retryAfter: Int64?
        for device in try store.devices(of: job.user, in: job.channel) {
            guard let renewed = try store.renew(job, nowMillis: hub.clock.nowMillis()) else {
                counters.lostLeases.add(1, ordering: .relaxed)
                return
            }
            job = renewed
            switch send(content, to: device, now: now) {
            case .sent:
                counters.add(.sent, device.platform)
            case .gone:
                _ = try store.unregister(platform: device.platform, token: device.token)
                counters.add(.removed, device.platform)
            case .retry(let after):
                retryAfter = max(retryAfter ?? 0, after)
            case .failed(let why):
                counters.add(.failed, device.platform)
                logger.info("push: a device refused a push", metadata: ["platform": .string(device.platform.rawValue), "why": .string(why)])
            }
        }
        if let retryAfter, job.attempts + 1 < Self.maxAttempts {
            let backoff = Int64(2_000) << Int64(min(job.attempts, 8))
            try store.reschedule(job.id, dueMillis: now + max(backoff, retryAfter), attempts: job.attempts + 1)
        } else {
            if retryAfter != nil { logger.info("push: gave up after retries", metadata: ["attempts": .int(job.attempts + 1)]) }
            try store.complete(job)
        }
    }

    enum Outcome: Equatable {
        case sent
        /// The device is gone for good (404/410): remove it.
        case gone
        /// Try again after at least this many ms (429, 5xx, a network failure).
        case retry(Int64)
        case failed(String)
    }

    private func send(_ content: PushRules.Content, to device: PushDevice, now: Int64) -> Outcome {
        switch device.platform {
        case .webpush: return sendWebPush(content, to: device, now: now)
        case .apns:
            guard let apns = settings.apns else { return .failed("APNs is not configured") }
            return apns.send(content, to: device, nowSeconds: now / 1000, caFile: settings.caFile)
        case .fcm:
            guard let fcm = settings.fcm else { return .failed("FCM is not configured") }
            return fcm.send(content, to: device, nowSeconds: now / 1000, caFile: settings.caFile)
        }
    }

    /// The notification a browser's service worker shows (docs/push.md): title, body, tag (the
    /// room, so a newer push replaces an older one), badge, and where it leads.
    static func webPushPayload(_ content: PushRules.Content) -> [UInt8] {
        JSONValue.object([
            "title": .string(content.title), "body": .string(content.body), "tag": .string(content.thread),
            "badge": .number(JSONNumber(content.badge)),
            "data": ["channel": .string(content.channel), "room": .string(content.room),
                     "offset": .number(JSONNumber(Int(content.offset))), "id": .string(content.messageID)],
        ]).serialized()
    }

    /// A `Topic` (≤ 32 URL-safe characters) per room: a queued push of the room is replaced.
    static func topic(for room: String) -> String {
        String(Base64URL.encode(OpenSSLHMAC().authenticationCode(key: Array("parley-topic".utf8), message: Array(room.utf8))).prefix(32))
    }

    private func sendWebPush(_ content: PushRules.Content, to device: PushDevice, now: Int64) -> Outcome {
        guard let vapid = settings.vapid, let p256dh = device.p256dh, let auth = device.auth else { return .failed("Web Push is off") }
        guard settings.allows(endpoint: device.token) else { return .failed("the endpoint is not an allowed push service") }
        let body: [UInt8], authorization: String
        do {
            body = try WebPush.encrypt(Self.webPushPayload(content), p256dh: p256dh, auth: auth)
            authorization = try WebPush.authorization(endpoint: device.token, key: vapid, subject: settings.vapidSubject,
                                                      nowSeconds: now / 1000)
        } catch {
            return .failed("encryption: \(error)")
        }
        let request = OutgoingRequest(url: device.token, headers: [
            ("Authorization", authorization), ("Content-Encoding", "aes128gcm"), ("Content-Type", "application/octet-stream"),
            ("TTL", "86400"), ("Urgency", DirectRoom.isDirect(content.room) ? "high" : "normal"), ("Topic", Self.topic(for: content.room)),
        ], body: body, caFile: settings.caFile)
        switch OutgoingHTTP.send(request) {
        case .failure:
            return .retry(5_000)
        case .success(let response):
            switch response.status {
            case 200...299: return .sent
            case 404, 410: return .gone
            case 429, 500...599:
                return .retry(response.retryAfterMillis(default: 5_000))
            default:
                return .failed("HTTP \(response.status)")
            }
        }
    }
}

/// Where a service made after start (push, the Engine.IO relay) is, once it is there (the
/// door context is made before it).
final class StartedService<Service: Sendable>: Sendable {
    private let slot = Mutex<Service?>(nil)
    var service: Service? { slot.withLock { $0 } }
    func set(_ service: Service) { slot.withLock { $0 = service } }
}

/// What the push service did, by provider, for `/metrics`.
final class PushCounters: Sendable {
    enum Outcome: String, CaseIterable { case sent, failed, removed }
    let enqueued = Atomic<Int>(0)
    /// Pushes waiting, as the worker last read it (at most about a second old).
    let queued = Atomic<Int>(0)
    let queuedReadMillis = Atomic<Int64>(0)
    let dropped = Atomic<Int>(0)
    /// Jobs this node let go because another taker held them when their turn came.
    let lostLeases = Atomic<Int>(0)
    private let counts = Mutex<[String: Int]>([:])

    func add(_ outcome: Outcome, _ platform: PushDevice.Platform) {
        counts.withLock { $0[outcome.rawValue + "/" + platform.rawValue, default: 0] += 1 }
    }

    func count(_ outcome: Outcome, _ platform: PushDevice.Platform) -> Int {
        counts.withLock { $0[outcome.rawValue + "/" + platform.rawValue] ?? 0 }
    }

    /// The admin overview's `push` object: providers, the queue and its bound, and what was
    /// sent, failed and removed by provider.
    func write(into w: inout JSONWriter, providers: [String], maxQueued: Int) {
        w.beginObject()
        w.key("providers"); w.beginArray(); for name in providers { w.writeString(name) }; w.endArray()
        w.key("queued"); w.writeInt(queued.load(ordering: .relaxed))
        w.key("max_queued"); w.writeInt(maxQueued)
        w.key("enqueued"); w.writeInt(enqueued.load(ordering: .relaxed))
        w.key("dropped"); w.writeInt(dropped.load(ordering: .relaxed))
        w.key("by_provider")
        w.beginObject()
        for platform in PushDevice.Platform.allCases {
            w.key(platform.rawValue)
            w.beginObject()
            for outcome in Outcome.allCases { w.key(outcome.rawValue); w.writeInt(count(outcome, platform)) }
            w.endObject()
        }
        w.endObject()
        w.endObject()
    }

    func write(into text: inout PrometheusText) {
        text.family("parley_push_total", "counter", help: "pushes by provider and outcome (sent, failed, removed device)")
        for platform in PushDevice.Platform.allCases {
            for outcome in Outcome.allCases {
                text.sample("parley_push_total", count(outcome, platform), labels: ["provider": platform.rawValue, "outcome": outcome.rawValue])
            }
        }
        text.family("parley_push_enqueued_total", "counter", help: "messages queued for a push to a user (each message of a coalesced push counts)")
        text.sample("parley_push_enqueued_total", enqueued.load(ordering: .relaxed))
        text.family("parley_push_dropped_total", "counter", help: "pushes not queued: the queue or the planner was full")
        text.sample("parley_push_dropped_total", dropped.load(ordering: .relaxed))
        text.family("parley_push_lost_leases_total", "counter",
                    help: "taken pushes left to another node: their lease ran out before their turn in this node's batch")
        text.sample("parley_push_lost_leases_total", lostLeases.load(ordering: .relaxed))
        text.family("parley_push_queued", "gauge", help: "pushes waiting to be sent (read by the push worker about once a second)")
        text.sample("parley_push_queued", queued.load(ordering: .relaxed))
    }
}
