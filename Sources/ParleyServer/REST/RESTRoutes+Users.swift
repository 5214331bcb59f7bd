import Foundation
import ParleyCore
import ParleyHTTP

/// Users over REST (docs/protocols.md, "REST" and "Users"): a user's inbox, and marking a
/// room read for them. On a channel with a secret the caller is the server (Basic) or the
/// user (a Bearer token whose `user` claim names them); on an open channel anyone may ask,
/// because there a user id proves nothing.
extension RESTRoutes {
    /// The channel and user of a `users/USER/…` request that may act for that user (and the
    /// token's claims, when it came with one), or the refusal: a bad name (400), or
    /// credentials that do not name the user (401/403).
    static func actingUser(_ request: RESTRequest, _ core: ServerCore)
        -> Result<(channel: String, user: String, claims: TokenClaims?), HTTPResponseFailure> {
        let channel = request.params["channel"] ?? "", user = request.params["user"] ?? ""
        guard RoomKey.isValidName(channel) else { return .failure(HTTPResponseFailure(.text(400, "invalid channel name\n"))) }
        if let problem = UserID.problem(with: user) { return .failure(HTTPResponseFailure(.text(400, "invalid user: \(problem)\n"))) }
        // The server (Basic) and anyone on an open channel may act for any user; a token only
        // for the user its `user` claim names, and its room permissions still apply.
        guard let claims = request.access.claims else { return .success((channel, user, nil)) }
        guard claims.user == user else {
            return .failure(HTTPResponseFailure(.text(403, "permission denied: the token's user claim does not name user \"\(user)\"\n")))
        }
        return .success((channel, user, claims))
    }

    /// `GET /CHANNEL/push/vapid`: `{"public_key"}`, what a browser subscribes with; 404 when
    /// push is off.
    @Sendable static func vapidKey(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        guard let key = core.pushService?.settings.vapid else { return .text(404, "push notifications are off on this server\n") }
        return .json(200, JSONValue.object(["public_key": .string(Base64URL.encode(key.publicKey))]).serialized())
    }

    /// `POST /CHANNEL/users/USER/devices`, body as native `register_device` (or with
    /// `"unregister": true`): 200 `{}` once stored.
    @Sendable static func registerDevice(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel: String, user: String
        switch actingUser(request, core) {
        case .success(let found): (channel, user) = (found.channel, found.user)
        case .failure(let failure): return failure.response
        }
        guard let push = core.pushService else { return .text(404, "push notifications are off on this server\n") }
        let body: JSONValue
        switch parseBody(request.body) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        let parsed: PushDeviceRequest
        switch PushDeviceRequest.parse(body) {
        case .success(let value): parsed = value
        case .failure(let problem): return .text(400, problem.message + "\n")
        }
        let unregister = body["unregister"]?.boolValue == true
        let device = parsed.device(channel: channel, user: user, nowMillis: core.hub.clock.nowMillis())
        if !unregister {
            if let problem = device.problem { return .text(400, problem + "\n") }
            if let refusal = push.settings.refusal(for: device) { return .text(refusal.status, refusal.message + "\n") }
        }
        let result = await withCheckedContinuation { continuation in
            push.perform({ () throws(ParleyError) in
                if unregister {
                    try ChatSession.unregister(device.platform, token: device.token, of: user, in: channel, from: push.store)
                } else {
                    try push.store.register(device)
                }
            }) { continuation.resume(returning: $0) }
        }
        switch result {
        case .success: return .json(200, Array("{}".utf8))
        case .failure(let error): return failure(error)
        }
    }

    /// `GET /CHANNEL/ROOM/users`: `{"users": [{user, name, devices}], "members": N}`, the
    /// room's members on every node folded into their users.
    @Sendable static func roomUsers(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key = RoomKey(channel: request.params["channel"] ?? "", room: request.params["room"] ?? "")
        guard RoomKey.isValidName(key.channel), RoomKey.isValidName(key.room) else { return .text(400, "invalid channel or room name\n") }
        let hub = core.hub
        let result = await withCheckedContinuation { continuation in
            // As the native `room_users`: at most --max-members-listed members looked at (users
            // carry names, up to 256 bytes each; 10,000 of them made a 3 MB answer).
            hub.users(of: key, limit: core.configuration.maxMembersListed) { continuation.resume(returning: $0) }
        }
        switch result {
        case .failure(let error): return failure(error)
        case .success(let found):
            var w = JSONWriter()
            w.beginObject()
            w.key("users"); NativeEncoding.writeRoomUsers(found.users, into: &w)
            w.key("members"); w.writeInt(found.members)
            w.endObject()
            return .json(200, w.bytes)
        }
    }

    /// `GET /CHANNEL/users/USER/inbox?limit=N`: `{conversations: [...], has_more}`, newest
    /// activity first, each conversation as the native door writes it.
    @Sendable static func inbox(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel: String, user: String
        switch actingUser(request, core) {
        case .success(let found): (channel, user) = (found.channel, found.user)
        case .failure(let failure): return failure.response
        }
        var limit = 20
        if let raw = request.head.queryValues("limit").first {
            guard let n = Int(raw), n >= 0 else { return .text(400, "limit must be a non-negative integer\n") }
            limit = n
        }
        // What the page reads is charged to the address's history bytes, as on the doors.
        let context = core.doorContext, budget = IPRateLimiter.Key(request.clientIP ?? "")
        if let refusal = context.historyBudgetSpent(budget) { return budgetSpent(refusal) }
        let result = await withCheckedContinuation { continuation in
            context.inboxReader.inbox(of: user, name: user, in: channel, limit: limit) { continuation.resume(returning: $0) }
        }
        switch result {
        case .failure(let error): return failure(error)
        case .success(let page):
            context.chargeHistory(page.bytesRead, to: budget)
            var w = JSONWriter()
            w.beginObject()
            w.key("conversations")
            w.beginArray()
            for conversation in page.conversations { NativeEncoding.writeConversation(conversation, into: &w) }
            w.endArray()
            w.key("has_more"); w.writeBool(page.hasMore)
            w.endObject()
            return .json(200, w.bytes)
        }
    }

    /// `POST /CHANNEL/users/USER/read` with `{"room": R, "offset": N}`: the mark as stored,
    /// `{room, offset}`. The room's sessions hear of it like a `read` from a connection.
    @Sendable static func markRead(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel: String, user: String, claims: TokenClaims?
        switch actingUser(request, core) {
        case .success(let found): (channel, user, claims) = found
        case .failure(let failure): return failure.response
        }
        let body: JSONValue
        switch parseBody(request.body) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        guard let room = body["room"]?.stringValue, RoomKey.isValidName(room) else { return .text(400, "room must be a room name\n") }
        guard let offset = body["offset"]?.intValue, offset >= 0 else { return .text(400, "offset must be a non-negative integer\n") }
        if let refusal = ChatRules.roomRefusal(room, user: user) { return .text(403, refusal.message + "\n") }
        // A token marks read only where it may subscribe, as a connection's `read` (a mark
        // puts the room among the user's conversations, with its newest message).
        if let claims, claims.permission(for: room)?.subscribe != true {
            return .text(403, "permission denied: the token does not allow subscribing to room \"\(room)\"\n")
        }
        let hub = core.hub, reads = core.doorContext.reads
        let mark = ReadMark(user: user, room: RoomKey(channel: channel, room: room), offset: Int64(offset), name: "",
                            updatedMillis: hub.clock.nowMillis())
        let result = await withCheckedContinuation { continuation in hub.markRead(mark, in: reads) { continuation.resume(returning: $0) } }
        switch result {
        case .failure(let error): return failure(error)
        case .success(let stored):
            return .json(200, JSONValue.object(["room": .string(room), "offset": .number(JSONNumber(Int(stored.offset)))]).serialized())
        }
    }
}
