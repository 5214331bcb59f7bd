import Foundation
import ParleyCore
import ParleyHTTP

/// One REST request as a route handler sees it.
struct RESTRequest: Sendable {
    let head: HTTPRequestHead
    let params: [String: String]
    let body: [UInt8]
    /// The client's address (`ip:port`), for logs.
    var remote: String? = nil
    /// The client's IP (the forwarded one behind a trusted proxy), for per-address budgets.
    var clientIP: String? = nil
    /// Who it speaks as, its credentials checked once by the router (``RESTAuth/access(_:core:)``).
    var access: RESTAuth.Access = .anonymous
}

/// A REST route: answers one request using the hub, when it has the answer (a publish
/// answers once the message is durable).
typealias RESTHandler = @Sendable (RESTRequest, ServerCore) async -> HTTPResponse

/// The Scaledrone-compatible REST API (docs/protocols.md, "REST"); authentication in RESTAuth.swift.
/// Success is 200 with JSON; failures are ≥400 with a text body.
enum RESTRoutes {
    static func router() -> HTTPRouter<RESTHandler> {
        var router = HTTPRouter<RESTHandler>()
        router.add("POST", "/:channel/:room/publish", publishToRoom)
        router.add("POST", "/:channel/publish/rooms", publishToRooms)
        router.add("POST", "/:channel/:room/messages/:id/:action", messageAction)
        router.add("GET", "/:channel/stats", stats)
        router.add("GET", "/:channel/members", channelMembers)
        router.add("GET", "/:channel/rooms", rooms)
        router.add("GET", "/:channel/:room/members", roomMembers)
        router.add("GET", "/:channel/room-members", roomMemberMap)
        router.add("GET", "/:channel/users/:user/inbox", inbox)
        router.add("GET", "/:channel/:room/users", roomUsers)
        router.add("GET", "/:channel/push/vapid", vapidKey)
        router.add("POST", "/:channel/users/:user/devices", registerDevice)
        router.add("POST", "/:channel/users/:user/read", markRead)
        return router
    }

    /// Routes `head` and runs its handler; 404 / 405 as text otherwise.
    static func handle(router: HTTPRouter<RESTHandler>, head: HTTPRequestHead, body: [UInt8], remote: String? = nil,
                       clientIP: String? = nil, core: ServerCore) async -> HTTPResponse {
        switch router.match(method: head.method, path: head.path) {
        case .found(let handler, let params):
            var request = RESTRequest(head: head, params: params, body: body, remote: remote, clientIP: clientIP)
            switch RESTAuth.access(request, core: core) {
            case .success(let access): request.access = access
            case .failure(let failure):
                let refusal = failure.response
                if refusal.status == 401 || refusal.status == 403 {
                    if head.method == "POST" { core.metrics.publishesRefused.counter(.forbidden).increment() }
                    core.logAuthFailure(door: .http, remote: remote, channel: request.params["channel"],
                                        reason: String(decoding: refusal.body, as: UTF8.self)
                                            .trimmingCharacters(in: .whitespacesAndNewlines))
                }
                return refusal
            }
            return await handler(request, core)
        case .methodNotAllowed(let allowed):
            var response = HTTPResponse.text(405, "method not allowed\n")
            response.headers.set("Allow", allowed.joined(separator: ", "))
            return response
        case .notFound:
            return .text(404, "not found\n")
        }
    }

    // MARK: publishing

    /// Answers once the message is durable: 200 with `{id, offset}`, or an error status
    /// (503 when the store failed) with a text body. Nothing is delivered that was not stored.
    @Sendable static func publishToRoom(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? "", room = request.params["room"] ?? ""
        guard RoomKey.isValidName(channel), RoomKey.isValidName(room) else { return .text(400, "invalid channel or room name\n") }
        let body: JSONValue
        switch parseBody(request.body) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        if let refusal = core.doorContext.chargePublish(request.body.count, from: request.clientIP) { return budgetSpent(refusal) }
        core.metrics.messagesReceived.counter(.http).increment()
        do {
            // Attachments are filled in from the upload registry (Files/AttachmentPublish.swift).
            let resolved = try await core.files.resolve(body, channel: channel, rooms: [room])
            let message = try await core.hub.publish(resolved.body, to: RoomKey(channel: channel, room: room), from: nil)
            core.files.noteReferences(resolved.ids, in: message)
            var w = JSONWriter()
            writeReceipt(message, into: &w, withRoom: false)
            return .json(200, w.bytes)
        } catch {
            if error.code != .unavailable && error.code != .internalError {
                core.metrics.publishesRefused.counter(PublishRefusal(error)).increment()
            }
            return failure(error)
        }
    }

    /// 429 with `Retry-After` for an address past one of its byte budgets
    /// (`--publish-bytes-per-ip`, `--history-bytes-per-ip`).
    static func budgetSpent(_ refusal: ChatRefusal) -> HTTPResponse {
        var response = HTTPResponse.text(429, refusal.message + "\n")
        response.headers.set("Retry-After", "1")
        return response
    }

    /// Publishes to each room on its own and reports per room, in the order asked: 200 when
    /// every room stored it, 207 when only some did (each entry says `id`/`offset` or
    /// `error`), and 503 (or the first error's status) when none did. Rooms can live on
    /// different nodes of a cluster, so there is no all-or-nothing across rooms.
    @Sendable static func publishToRooms(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        let names = request.head.queryValues("r")
        guard RoomKey.isValidName(channel) else { return .text(400, "invalid channel name\n") }
        guard !names.isEmpty else { return .text(400, "name at least one room with ?r=ROOM\n") }
        guard names.count <= maxRoomsPerPublish else { return .text(400, "at most \(maxRoomsPerPublish) rooms per publish\n") }
        guard names.allSatisfy(RoomKey.isValidName) else { return .text(400, "invalid room name\n") }
        // Each room stores the body once: a 1 MiB body to 100 rooms would be 100 MiB on disk
        // for one request.
        let limit = core.configuration.multiPublishMaxBytes
        guard request.body.count * names.count <= limit else {
            return .text(413, "a body of \(request.body.count) bytes to \(names.count) rooms would store \(request.body.count * names.count) bytes (limit \(limit) per request, \(ServerSetting.flag(of: \ServerConfiguration.multiPublishMaxBytes))); publish to fewer rooms or send less\n")
        }
        let parsed: JSONValue
        switch parseBody(request.body) {
        case .success(let value): parsed = value
        case .failure(let failure): return failure.response
        }
        if let refusal = core.doorContext.chargePublish(request.body.count * names.count, from: request.clientIP) {
            return budgetSpent(refusal)
        }
        let resolved: ResolvedPublish
        do {
            resolved = try await core.files.resolve(parsed, channel: channel, rooms: names)
        } catch {
            return failure(error)
        }
        let (body, uploads) = (resolved.body, resolved.ids)
        let (hub, files) = (core.hub, core.files)
        core.metrics.messagesReceived.counter(.http).increment(by: names.count)
        let results = await withTaskGroup(of: (Int, Result<Message, ParleyError>).self) { group in
            for (index, name) in names.enumerated() {
                group.addTask {
                    do throws(ParleyError) {
                        let message = try await hub.publish(body, to: RoomKey(channel: channel, room: name), from: nil)
                        files.noteReferences(uploads, in: message)
                        return (index, .success(message))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results = [Result<Message, ParleyError>?](repeating: nil, count: names.count)
            for await (index, result) in group { results[index] = result }
            return results.map { $0! }
        }
        var w = JSONWriter()
        w.beginArray()
        var firstError: ParleyError?
        for (name, result) in zip(names, results) {
            switch result {
            case .success(let message):
                writeReceipt(message, into: &w, withRoom: true)
            case .failure(let error):
                firstError = firstError ?? error
                w.beginObject()
                w.key("room"); w.writeString(name)
                w.key("error"); w.writeString(error.message)
                w.endObject()
            }
        }
        w.endArray()
        guard let firstError else { return .json(200, w.bytes) }
        if results.allSatisfy({ if case .failure = $0 { true } else { false } }) {
            var response = failure(firstError)
            response.headers.set("Content-Type", "text/plain; charset=utf-8")
            return response
        }
        return .json(207, w.bytes)
    }

    /// A message action for bots and backends (docs/protocols.md, "REST"): `reply` (the body
    /// is the reply), `edit` (the body is the new body), `delete` (no body), `react` and
    /// `unreact` (`{"emoji": "👍"}`), on message `id` of the room, as the server (no sender;
    /// a reaction's reactor id is ""). With the channel's secret or a token granting
    /// `moderate` it may edit and delete any message; without, only reply and react (the
    /// server is the author of no member's message). The edit window and the limits hold:
    /// the same rules as every door (``MessageActionRules``).
    /// 200 with `{id, offset}` once stored; errors as text with the rule's code in brackets.
    @Sendable static func messageAction(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? "", room = request.params["room"] ?? ""
        guard RoomKey.isValidName(channel), RoomKey.isValidName(room) else { return .text(400, "invalid channel or room name\n") }
        let id = request.params["id"] ?? ""
        let body: JSONValue?
        if request.body.isEmpty {
            body = nil
        } else {
            switch parseBody(request.body) {
            case .success(let value): body = value
            case .failure(let failure): return failure.response
            }
        }
        let action: MessageActionRequest
        switch request.params["action"] {
        case "reply", "edit":
            guard let body else { return .text(400, "the body must be JSON: the \(request.params["action"]!)'s message\n") }
            action = request.params["action"] == "reply" ? .reply(to: id, body: body, messageID: nil) : .edit(id, body: body)
        case "delete":
            action = .delete(id)
        case "react", "unreact":
            guard let emoji = body?["emoji"]?.stringValue else { return .text(400, "the body must be {\"emoji\": \"…\"}\n") }
            action = request.params["action"] == "react" ? .react(id, emoji: emoji) : .unreact(id, emoji: emoji)
        default:
            return .text(404, "no such message action (reply, edit, delete, react, unreact)\n")
        }
        if let problem = MessageActionRules.problem(with: action) { return refusalResponse(problem) }
        // A reply or an edit carries a body, like a publish: the same byte budget, as on the doors.
        if let body = action.body, let refusal = core.doorContext.chargePublish(body.approximateSize, from: request.clientIP) {
            return budgetSpent(refusal)
        }
        core.metrics.messagesReceived.counter(.http).increment()
        let rules = MessageActionRules(core.configuration)
        let hub = core.hub
        let moderates = request.access.moderates(room)
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Message, ChatRefusal>, Never>) in
            rules.perform(action, in: RoomKey(channel: channel, room: room), as: nil, canModerate: moderates, hub: hub) {
                continuation.resume(returning: $0)
            }
        }
        switch result {
        case .success(let stored):
            var w = JSONWriter()
            writeReceipt(stored, into: &w, withRoom: false)
            return .json(200, w.bytes)
        case .failure(let refusal):
            return refusalResponse(refusal)
        }
    }

    /// A refused action: its status, and its text with the stable code in brackets.
    static func refusalResponse(_ refusal: ChatRefusal) -> HTTPResponse {
        let status = switch refusal.code {
        case .badAction: 400
        case .notAuthor, .editWindowClosed, .forbidden: 403
        case .unknownMessage: 404
        case .messageDeleted: 410
        case .alreadyReacted, .notReacted, .tooManyEdits, .tooManyReactions: 409
        default: 503
        }
        return .text(status, "\(refusal.description)\n")
    }

    /// Most rooms one multi-room publish may name.
    static let maxRoomsPerPublish = 100

    private static func writeReceipt(_ message: Message, into w: inout JSONWriter, withRoom: Bool) {
        w.beginObject()
        if withRoom { w.key("room"); w.writeString(message.room.room) }
        w.key("id"); w.writeString(message.id)
        w.key("offset"); w.writeInt(Int(message.offset))
        w.endObject()
    }

    static func parseBody(_ bytes: [UInt8]) -> Result<JSONValue, HTTPResponseFailure> {
        guard !bytes.isEmpty else { return .failure(HTTPResponseFailure(.text(400, "the body must be JSON\n"))) }
        do {
            return .success(try JSONParser.parse(bytes))
        } catch {
            return .failure(HTTPResponseFailure(.text(400, "invalid JSON body: \(error.description)\n")))
        }
    }

    static func failure(_ error: ParleyError) -> HTTPResponse {
        let status = (400...599).contains(error.code.rawValue) && error.code != .limitReached ? error.code.rawValue : 429
        return .text(status, error.message + "\n")
    }

    // MARK: queries

    /// Most rooms one query answers (`?after=ROOM` pages on, `?limit=N` asks for fewer).
    static let maxRoomsPerPage = 1_000

    private static func page(_ request: RESTRequest) -> (after: String?, limit: Int) {
        let limit = request.head.query("limit").flatMap(Int.init).map { max(1, min($0, maxRoomsPerPage)) } ?? maxRoomsPerPage
        return (request.head.query("after"), limit)
    }

    /// What one channel listing answers: a route, its channel and page.
    struct ListingKey: Hashable, Sendable {
        let route: String
        let channel: String
        var after: String?
        var limit = 0
    }

    /// How long a channel listing is given again (`/stats`, `/members`, `/rooms`,
    /// `/room-members`).
    static let listingReuseMillis: Int64 = 1_000
    /// Most channel listings a node makes at once (each walks up to ``maxRoomsPerPage`` rooms,
    /// in a cluster a Redis read each); others wait in line.
    static let maxListingsAtOnce = 4
    /// Most requests waiting in line for a listing; past it, a 503.
    static let maxListingsWaiting = 256
    /// Most bytes of listings kept to be given again (each for a second).
    static let maxListingBytesKept = 32 << 20

    /// A listing that walks a channel's rooms: open channels answer it without credentials
    /// and the REST rate is per address, so requests for the same listing share one walk and
    /// its answer is given again for ``listingReuseMillis``. A node makes at most
    /// ``maxListingsAtOnce`` at once; the others wait in line, first come first served, and
    /// past ``maxListingsWaiting`` waiting get a 503 with `Retry-After`.
    private static func listing(_ key: ListingKey, _ core: ServerCore,
                                _ make: @escaping @Sendable () async throws(ParleyError) -> HTTPResponse) async -> HTTPResponse {
        let answer = await core.channelListings.answer(key) {
            do throws(ParleyError) { return try await make() } catch { return failure(error) }
        }
        if let answer { return answer }
        core.limits.breached(.restListings)
        var response = HTTPResponse.text(503, "the server is busy listing channels; retry in a moment\n")
        response.headers.set("Retry-After", "1")
        return response
    }

    @Sendable static func stats(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        return await listing(ListingKey(route: "stats", channel: channel), core) { () throws(ParleyError) in
            let count = try await core.hub.clientIDs(in: channel, roomLimit: maxRoomsPerPage).count
            var w = JSONWriter()
            w.beginObject()
            w.key("users_count"); w.writeInt(count)
            w.endObject()
            return .json(200, w.bytes)
        }
    }

    @Sendable static func channelMembers(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        return await listing(ListingKey(route: "members", channel: channel), core) { () throws(ParleyError) in
            stringArray(try await core.hub.clientIDs(in: channel, roomLimit: maxRoomsPerPage))
        }
    }

    /// The channel's rooms with members, sorted by name: `?after=ROOM&limit=N` pages.
    @Sendable static func rooms(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        let (after, limit) = page(request)
        return await listing(ListingKey(route: "rooms", channel: channel, after: after, limit: limit), core) { () throws(ParleyError) in
            stringArray(try await core.hub.occupiedRooms(in: channel, after: after, limit: limit))
        }
    }

    @Sendable static func roomMembers(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key = RoomKey(channel: request.params["channel"] ?? "", room: request.params["room"] ?? "")
        do {
            return stringArray(uniqueIDs(try await core.hub.members(of: key, limit: Hub.maxMembersPerRoomQuery).members))
        } catch {
            return failure(error)
        }
    }

    /// `{room: [ids]}` for the channel's rooms with members: `?after=ROOM&limit=N` pages.
    @Sendable static func roomMemberMap(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        let (after, limit) = page(request)
        return await listing(ListingKey(route: "room-members", channel: channel, after: after, limit: limit), core) { () throws(ParleyError) in
            var w = JSONWriter()
            w.beginObject()
            for (room, members) in try await core.hub.roomMembers(in: channel, after: after, limit: limit) {
                w.key(room)
                w.beginArray()
                for id in uniqueIDs(members) { w.writeString(id) }
                w.endArray()
            }
            w.endObject()
            return .json(200, w.bytes)
        }
    }

    private static func uniqueIDs(_ members: [Member]) -> [String] {
        var seen = Set<String>()
        return members.map(\.id).filter { seen.insert($0).inserted }
    }

    private static func stringArray(_ values: [String]) -> HTTPResponse {
        var w = JSONWriter()
        w.beginArray()
        for value in values { w.writeString(value) }
        w.endArray()
        return .json(200, w.bytes)
    }
}

/// A ready error response carried through a `Result`.
struct HTTPResponseFailure: Error {
    let response: HTTPResponse
    init(_ response: HTTPResponse) { self.response = response }
}
