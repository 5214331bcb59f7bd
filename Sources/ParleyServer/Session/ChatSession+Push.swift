import ParleyCore

/// Push commands for every door that offers them (docs/push.md): a user's devices and mutes.
extension ChatSession {
    private func pushCheck() -> Result<(PushService, String, String), ChatRefusal> {
        guard let member, let channel else { return .failure(ChatRefusal(.notIdentified, "handshake first")) }
        guard let push = context.push.service else {
            return .failure(ChatRefusal(.refused, "push notifications are off on this server (no VAPID or APNs keys; docs/push.md)"))
        }
        guard member.userID != nil else {
            return .failure(ChatRefusal(.notIdentified, "a device belongs to a user: handshake with user_id, or a token with a user claim"))
        }
        if let refusal = admitRate() { return .failure(refusal) }
        return .success((push, channel, member.user))
    }

    /// Registers a device of the member's user; `completion` runs on the push queue.
    func registerDevice(_ request: PushDeviceRequest, completion: @escaping @Sendable (ParleyError?) -> Void) -> ChatRefusal? {
        let push: PushService, channel: String, user: String
        switch pushCheck() {
        case .failure(let refusal): return refusal
        case .success(let found): (push, channel, user) = found
        }
        let device = request.device(channel: channel, user: user, nowMillis: context.nowMillis)
        if let problem = device.problem { return ChatRefusal(.refused, problem) }
        if let refusal = push.settings.refusal(for: device) { return ChatRefusal(.refused, refusal.message) }
        push.perform({ () throws(ParleyError) in try push.store.register(device) }) { completion($0.failure) }
        return nil
    }

    func unregisterDevice(_ platform: PushDevice.Platform, token: String, completion: @escaping @Sendable (ParleyError?) -> Void) -> ChatRefusal? {
        let push: PushService, channel: String, user: String
        switch pushCheck() {
        case .failure(let refusal): return refusal
        case .success(let found): (push, channel, user) = found
        }
        push.perform({ () throws(ParleyError) in try Self.unregister(platform, token: token, of: user, in: channel, from: push.store) }) {
            completion($0.failure)
        }
        return nil
    }

    /// Removes a device of `user` in `channel`; a device that is someone else's (a token that
    /// leaked, or guessed) is left alone, and the answer is the same: a user removes only
    /// their own.
    static func unregister(_ platform: PushDevice.Platform, token: String, of user: String, in channel: String,
                           from store: any PushStore) throws(ParleyError) {
        guard try store.devices(of: user, in: channel).contains(where: { $0.platform == platform && $0.token == token }) else { return }
        _ = try store.unregister(platform: platform, token: token)
    }

    /// Mutes `room` (nil: every room) for the member's user until `untilSeconds` (0 lifts it).
    func mute(_ room: String?, untilSeconds: Int64, completion: @escaping @Sendable (ParleyError?) -> Void) -> ChatRefusal? {
        let push: PushService, channel: String, user: String
        switch pushCheck() {
        case .failure(let refusal): return refusal
        case .success(let found): (push, channel, user) = found
        }
        let mute = PushMute(room: room, untilMillis: untilSeconds * 1000), now = context.nowMillis
        push.perform({ () throws(ParleyError) in try push.store.setMute(mute, user: user, channel: channel, nowMillis: now) }) {
            completion($0.failure)
        }
        return nil
    }
}

extension Result {
    /// The failure, or nil.
    var failure: Failure? { if case .failure(let error) = self { error } else { nil } }
}
