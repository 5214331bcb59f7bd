import Foundation
import ParleyCore
import ParleyHTTP
import ParleyLog

/// The admin API under `/admin/api/` (docs/operations.md, "Admin API"): JSON in and out,
/// every call with `Authorization: Bearer <admin token>` from the config file (`admin.token`);
/// 401 without it, and for everything while no admin token is configured. Each change an
/// operator makes is logged at info.
enum AdminAPI {
    static let router: HTTPRouter<RESTHandler> = {
        var router = HTTPRouter<RESTHandler>()
        router.add("GET", "/admin/api/overview", overview)
        router.add("GET", "/admin/api/stats", stats)
        router.add("GET", "/admin/api/channels", channels)
        router.add("GET", "/admin/api/channels/:channel/rooms", rooms)
        router.add("GET", "/admin/api/channels/:channel/rooms/:room/members", members)
        router.add("GET", "/admin/api/channels/:channel/rooms/:room/messages", messages)
        router.add("DELETE", "/admin/api/channels/:channel/rooms/:room/messages/:offset", deleteMessage)
        router.add("POST", "/admin/api/channels/:channel/rooms/:room/close", closeRoom)
        router.add("GET", "/admin/api/clients", clients)
        router.add("POST", "/admin/api/clients/:id/disconnect", disconnect)
        router.add("GET", "/admin/api/bans", bans)
        router.add("POST", "/admin/api/bans", addBan)
        router.add("DELETE", "/admin/api/bans/:id", removeBan)
        return router
    }()

    /// Most rooms, members or messages one call lists.
    static let maxPage = 1_000

    static func route(_ head: HTTPRequestHead, core: ServerCore) -> OperationsRoute {
        guard let token = core.configuration.adminToken else {
            return OperationsRoute(handler: { _, _ in
                OperationsRoutes.unauthorized("the admin API is off: set admin.token in the config file")
            }, params: [:], exemptFromRateLimit: false)
        }
        guard OperationsRoutes.carries(head, token: token) else {
            return OperationsRoute(handler: { request, core in
                core.logAuthFailure(door: .http, remote: request.remote, reason: "admin API: missing or wrong bearer token")
                return OperationsRoutes.unauthorized("the admin API needs Authorization: Bearer <admin token>")
            }, params: [:], exemptFromRateLimit: false)
        }
        switch router.match(method: head.method, path: head.path) {
        case .found(let handler, let params):
            return OperationsRoute(handler: handler, params: params, exemptFromRateLimit: true)
        case .methodNotAllowed(let allowed):
            return OperationsRoute(handler: { _, _ in
                var response = error(405, "method not allowed")
                response.headers.set("Allow", allowed.joined(separator: ", "))
                return response
            }, params: [:], exemptFromRateLimit: true)
        case .notFound:
            return OperationsRoute(handler: { _, _ in error(404, "no such admin API call") }, params: [:], exemptFromRateLimit: true)
        }
    }

    // MARK: answers

    static func error(_ status: Int, _ message: String) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        w.key("error"); w.writeString(message)
        w.endObject()
        var response = HTTPResponse.json(status, w.bytes)
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    static func json(_ status: Int = 200, _ build: (inout JSONWriter) -> Void) -> HTTPResponse {
        var w = JSONWriter()
        build(&w)
        var response = HTTPResponse.json(status, w.bytes)
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    private static func writeDouble(_ value: Double, _ w: inout JSONWriter) {
        w.writeNumber(JSONNumber(value.isFinite ? (value * 1000).rounded() / 1000 : 0))
    }

    private static func writeDoors(_ values: [(DoorKind, Int)], _ w: inout JSONWriter) {
        w.beginObject()
        for (door, count) in values { w.key(door.rawValue); w.writeInt(count) }
        w.endObject()
    }

    /// The room of `/channels/:channel/rooms/:room/…`, or the 400 to send.
    private static func roomKey(_ request: RESTRequest) -> Result<RoomKey, HTTPResponseFailure> {
        let channel = request.params["channel"] ?? "", room = request.params["room"] ?? ""
        guard RoomKey.isValidName(channel), RoomKey.isValidName(room) else {
            return .failure(HTTPResponseFailure(error(400, "invalid channel or room name")))
        }
        return .success(RoomKey(channel: channel, room: room))
    }

    /// The request's JSON object body (an empty body is `{}`), or the 400 to send.
    private static func bodyObject(_ request: RESTRequest) -> Result<JSONObject, HTTPResponseFailure> {
        guard !request.body.isEmpty else { return .success(JSONObject()) }
        guard let value = try? JSONParser.parse(request.body), case .object(let object) = value else {
            return .failure(HTTPResponseFailure(error(400, "the body must be a JSON object")))
        }
        return .success(object)
    }

    private static func reason(_ object: JSONObject) -> String {
        let text = object["reason"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        return text.isEmpty ? "by the operator" : String(text.prefix(200))
    }

    private static func audit(_ core: ServerCore, _ request: RESTRequest, _ action: String, _ metadata: LogMetadata) {
        var all: LogMetadata = ["action": .string(action)]
        if let remote = request.remote { all["admin"] = .string(remote) }
        core.logger.info("admin: \(action)", metadata: all.merging(metadata))
    }

    // MARK: reading

    @Sendable static func overview(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let metrics = core.metrics
        let now = LogDestination.unixMillis()
        return json { w in
            w.beginObject()
            w.key("version"); w.writeString(BuildInfo.version)
            w.key("commit"); w.writeString(BuildInfo.commit)
            w.key("started_at"); w.writeInt(Int(core.startedUnixMillis))
            w.key("uptime_seconds"); w.writeInt(Int((now - core.startedUnixMillis) / 1000))
            w.key("draining"); w.writeBool(core.readiness.isDraining)
            w.key("open_connections"); w.writeInt(core.gate.open.load(ordering: .relaxed))
            w.key("connections"); writeDoors(metrics.openConnections.all, &w)
            for door in core.doors.all { door.writeStatus(into: &w) }
            w.key("identified_clients"); w.writeInt(core.directory.count)
            w.key("rooms_in_memory"); w.writeInt(core.hub.roomsInMemory)
            w.key("members_in_memory"); w.writeInt(core.hub.membersInMemory)
            w.key("messages_received"); writeDoors(metrics.messagesReceived.all, &w)
            w.key("messages_delivered")
            writeDoors(DoorKind.allCases.map { door in (door, metrics.loops.reduce(0) { $0 + $1.delivered.counter(door).count }) }, &w)
            w.key("bans"); w.writeInt(core.bans.list(nowMillis: now).count)
            w.key("push")
            if let push = core.pushService {
                push.counters.write(into: &w, providers: push.settings.providers, maxQueued: push.settings.maxQueued)
            } else {
                w.writeNull()
            }
            w.key("log_level"); w.writeString(core.logger.logLevel.description)
            w.endObject()
        }
    }

    /// The dashboard's charts: a sample every few seconds over the last 15 minutes.
    @Sendable static func stats(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let history = core.statsHistory
        let samples = history.samples
        return json { w in
            w.beginObject()
            w.key("interval_seconds"); writeDouble(Double(history.intervalMillis) / 1000, &w)
            w.key("samples")
            w.beginArray()
            for sample in samples {
                w.beginObject()
                w.key("time"); w.writeInt(Int(sample.timeMillis))
                w.key("connections"); writeDoors(DoorKind.allCases.map { ($0, sample.connections[$0] ?? 0) }, &w)
                w.key("messages_per_second"); writeDouble(sample.messagesPerSecond, &w)
                w.key("deliveries_per_second"); writeDouble(sample.deliveriesPerSecond, &w)
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
    }

    /// The configured channels, the lobby's, and every channel with a room in memory.
    @Sendable static func channels(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let configuration = core.configuration
        var inMemory: [String: (rooms: Int, members: Int)] = [:]
        for summary in core.hub.roomSummaries() {
            inMemory[summary.key.channel, default: (0, 0)].rooms += 1
            inMemory[summary.key.channel, default: (0, 0)].members += summary.members
        }
        var ids = configuration.channels.map(\.id)
        for id in [configuration.lobby.channel] + inMemory.keys.sorted() where !ids.contains(id) { ids.append(id) }
        return json { w in
            w.beginObject()
            w.key("open_channels"); w.writeBool(configuration.openChannels)
            w.key("lobby"); w.writeString(configuration.lobby.description)
            w.key("channels")
            w.beginArray()
            for id in ids {
                let settings = configuration.settings(ofChannel: id)
                w.beginObject()
                w.key("id"); w.writeString(id)
                w.key("configured"); w.writeBool(settings != nil)
                w.key("open"); w.writeBool(configuration.refusal(ofChannel: id) == nil)
                w.key("require_auth"); w.writeBool(settings?.requireAuth == true)
                w.key("has_secret"); w.writeBool(settings?.secret != nil)
                if let rate = settings?.publishRate { w.key("publish_rate"); writeDouble(rate, &w) }
                w.key("rooms_in_memory"); w.writeInt(inMemory[id]?.rooms ?? 0)
                w.key("members_in_memory"); w.writeInt(inMemory[id]?.members ?? 0)
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
    }

    /// A channel's rooms with members (every node's), by name, a page at a time:
    /// `?after=ROOM&limit=N`; `next` is the cursor of the following page.
    @Sendable static func rooms(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        guard RoomKey.isValidName(channel) else { return error(400, "invalid channel name") }
        let limit = request.head.query("limit").flatMap(Int.init).map { max(1, min($0, maxPage)) } ?? 100
        do {
            let names = try await core.hub.occupiedRooms(in: channel, after: request.head.query("after"), limit: limit)
            var counts: [Int] = []
            for name in names {
                counts.append(try await core.hub.members(of: RoomKey(channel: channel, room: name), limit: 0).total)
            }
            return json { w in
                w.beginObject()
                w.key("rooms")
                w.beginArray()
                for (name, count) in zip(names, counts) {
                    w.beginObject()
                    w.key("room"); w.writeString(name)
                    w.key("members"); w.writeInt(count)
                    w.endObject()
                }
                w.endArray()
                w.key("next")
                if names.count == limit, let last = names.last { w.writeString(last) } else { w.writeNull() }
                w.endObject()
            }
        } catch {
            return AdminAPI.error(503, error.message)
        }
    }

    /// A room's members across doors (every node's), with what this node knows of the
    /// ones connected here: door, address, since when.
    @Sendable static func members(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key: RoomKey
        switch roomKey(request) {
        case .success(let value): key = value
        case .failure(let failure): return failure.response
        }
        do {
            let (members, total) = try await core.hub.members(of: key, limit: maxPage)
            // Cluster mode: the other nodes' connections, for the members they hold.
            var elsewhere: [String: (ConnectionSummary, String)] = [:]
            if let sync = core.connectionSync,
               let nodes = try? await sync.roster.nodes(nowMillis: core.hub.clock.nowMillis()) {
                for entry in nodes where entry.node != sync.node {
                    for client in entry.clients { elsewhere[client.id] = (client, entry.node) }
                }
            }
            return json { w in
                w.beginObject()
                w.key("room"); w.writeString(key.room)
                w.key("total"); w.writeInt(total)
                w.key("members")
                w.beginArray()
                for member in members {
                    let here = core.directory.client(member.id)
                    w.beginObject()
                    w.key("id"); w.writeString(member.id)
                    w.key("name"); w.writeString(member.displayName)
                    if let clientData = member.clientData { w.key("clientData"); w.write(clientData) }
                    if let authData = member.authData { w.key("authData"); w.write(authData) }
                    w.key("connected_here"); w.writeBool(here != nil)
                    if let here {
                        w.key("door"); w.writeString(here.door.rawValue)
                        if let ip = here.remoteIP { w.key("ip"); w.writeString(ip) }
                        w.key("connected_at"); w.writeInt(Int(here.connectedAtMillis))
                    } else if let (there, node) = elsewhere[member.id] {
                        w.key("door"); w.writeString(there.door)
                        if let ip = there.ip { w.key("ip"); w.writeString(ip) }
                        w.key("connected_at"); w.writeInt(Int(there.connectedAtMillis))
                        w.key("node"); w.writeString(node)
                    }
                    w.endObject()
                }
                w.endArray()
                w.endObject()
            }
        } catch {
            return AdminAPI.error(503, error.message)
        }
    }

    /// A room's stored messages, newest page first as in the native `history` command:
    /// `?before=OFFSET&limit=N` (default 50); deleted ones as tombstones.
    @Sendable static func messages(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key: RoomKey
        switch roomKey(request) {
        case .success(let value): key = value
        case .failure(let failure): return failure.response
        }
        let limit = request.head.query("limit").flatMap(Int.init).map { max(1, min($0, maxPage)) } ?? 50
        let before = request.head.query("before").flatMap(Int64.init)
        do {
            let page = try await core.hub.storedHistory(of: key, before: before, limit: limit)
            return json { w in
                w.beginObject()
                w.key("room"); w.writeString(key.room)
                w.key("messages")
                w.beginArray()
                for message in page.messages {
                    w.beginObject()
                    w.key("offset"); w.writeInt(Int(message.offset))
                    w.key("id"); w.writeString(message.id)
                    w.key("time"); w.writeInt(Int(message.timestampMillis))
                    if let sender = message.sender {
                        w.key("client_id"); w.writeString(sender.id)
                        w.key("name"); w.writeString(sender.displayName)
                    }
                    w.key("message"); w.write(message.body)
                    w.key("deleted"); w.writeBool(message.isDeleted)
                    // In its current state, as every history page (docs/protocols.md, "Message actions").
                    if let replyTo = message.replyTo { w.key("reply_to"); w.writeString(replyTo.id) }
                    if let edited = message.editedMillis { w.key("edited"); w.writeInt(Int(edited)) }
                    if !message.reactions.isEmpty {
                        w.key("reactions")
                        w.beginArray()
                        for reaction in message.reactions {
                            w.beginObject()
                            w.key("emoji"); w.writeString(reaction.emoji)
                            w.key("count"); w.writeInt(reaction.count)
                            w.key("names")
                            w.beginArray()
                            for name in reaction.shownNames { w.writeString(name) }
                            w.endArray()
                            w.endObject()
                        }
                        w.endArray()
                    }
                    w.endObject()
                }
                w.endArray()
                w.key("has_more"); w.writeBool(page.hasMore)
                w.endObject()
            }
        } catch {
            return AdminAPI.error(503, error.message)
        }
    }

    /// This node's identified clients, oldest first.
    @Sendable static func clients(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let here = core.directory.all.sorted { ($0.connectedAtMillis, $0.id) < ($1.connectedAtMillis, $1.id) }
        guard let sync = core.connectionSync else {
            return json { w in
                w.beginObject()
                w.key("total"); w.writeInt(here.count)
                w.key("clients")
                w.beginArray()
                for client in here.prefix(maxPage) { writeClient(client.summary, node: nil, &w) }
                w.endArray()
                w.endObject()
            }
        }
        // Cluster mode: this node's connections live, every other node's as it last published them.
        let others: [NodeConnections]
        do {
            others = try await sync.roster.nodes(nowMillis: core.hub.clock.nowMillis()).filter { $0.node != sync.node }
        } catch {
            return AdminAPI.error(503, "the other nodes' connections cannot be read: \(error.message)")
        }
        var listed = here.map { ($0.summary, sync.node) }
        for entry in others { listed += entry.clients.map { ($0, entry.node) } }
        listed.sort { ($0.0.connectedAtMillis, $0.0.id) < ($1.0.connectedAtMillis, $1.0.id) }
        let total = here.count + others.reduce(0) { $0 + $1.count }
        return json { w in
            w.beginObject()
            w.key("total"); w.writeInt(total)
            w.key("nodes")
            w.beginArray()
            w.beginObject()
            w.key("node"); w.writeString(sync.node)
            w.key("connections"); w.writeInt(here.count)
            w.key("here"); w.writeBool(true)
            w.endObject()
            for entry in others {
                w.beginObject()
                w.key("node"); w.writeString(entry.node)
                w.key("connections"); w.writeInt(entry.count)
                w.key("listed"); w.writeInt(entry.clients.count)
                w.key("published_at"); w.writeInt(Int(entry.publishedMillis))
                w.endObject()
            }
            w.endArray()
            w.key("clients")
            w.beginArray()
            for (client, node) in listed.prefix(maxPage) { writeClient(client, node: node, &w) }
            w.endArray()
            w.endObject()
        }
    }

    private static func writeClient(_ client: ConnectionSummary, node: String?, _ w: inout JSONWriter) {
        w.beginObject()
        client.writeFields(&w)
        if let node { w.key("node"); w.writeString(node) }
        w.endObject()
    }

    @Sendable static func bans(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let bans = core.bans.list(nowMillis: core.hub.clock.nowMillis())
        return json { w in
            w.beginObject()
            w.key("bans")
            w.beginArray()
            for ban in bans { writeBan(ban, &w) }
            w.endArray()
            w.endObject()
        }
    }

    private static func writeBan(_ ban: Ban, _ w: inout JSONWriter) {
        w.beginObject()
        w.key("id"); w.writeInt(ban.id)
        w.key(ban.target.kind); w.writeString(ban.target.value)
        w.key("reason"); w.writeString(ban.reason)
        w.key("created_at"); w.writeInt(Int(ban.createdMillis))
        w.key("until"); w.writeInt(Int(ban.untilMillis))
        w.endObject()
    }

    // MARK: acting

    /// Replaces the message by a tombstone everywhere: 200 `{"deleted": OFFSET}`, 404 when
    /// the room has no message there.
    @Sendable static func deleteMessage(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key: RoomKey
        switch roomKey(request) {
        case .success(let value): key = value
        case .failure(let failure): return failure.response
        }
        guard let offset = request.params["offset"].flatMap(Int64.init), offset > 0 else {
            return error(400, "the offset must be a positive whole number")
        }
        do {
            guard try await core.hub.deleteMessage(at: offset, in: key) else {
                return error(404, "room \(key) has no message at offset \(offset)")
            }
            audit(core, request, "message deleted", ["room": .string(key.description), "offset": .int(Int(offset))])
            return json { w in
                w.beginObject()
                w.key("deleted"); w.writeInt(Int(offset))
                w.endObject()
            }
        } catch {
            return AdminAPI.error(503, error.message)
        }
    }

    /// Everyone in the room, on every node, is told (`room_closed`) and leaves it.
    @Sendable static func closeRoom(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let key: RoomKey
        switch roomKey(request) {
        case .success(let value): key = value
        case .failure(let failure): return failure.response
        }
        let body: JSONObject
        switch bodyObject(request) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        let why = reason(body)
        let members = (try? await core.hub.members(of: key, limit: 0).total) ?? 0
        core.hub.closeRoom(key, reason: why)
        audit(core, request, "room closed", ["room": .string(key.description), "members": .int(members), "reason": .string(why)])
        return json { w in
            w.beginObject()
            w.key("closed"); w.writeString(key.room)
            w.key("members"); w.writeInt(members)
            w.endObject()
        }
    }

    /// Closes the client's connection (this node's clients), telling it why.
    @Sendable static func disconnect(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let id = request.params["id"] ?? ""
        let body: JSONObject
        switch bodyObject(request) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        let why = reason(body)
        guard let client = core.directory.client(id) else {
            return await disconnectElsewhere(id, reason: why, request, core)
        }
        client.control.run { $0.disconnect(byAdministrator: why) }
        audit(core, request, "client disconnected", ["client": .string(id), "door": .string(client.door.rawValue), "reason": .string(why)])
        return json { w in
            w.beginObject()
            w.key("disconnected"); w.writeString(id)
            w.endObject()
        }
    }

    /// Cluster mode: asks the node that lists `id` to disconnect it (202: it does so within
    /// about a second). 404 when no node lists it.
    private static func disconnectElsewhere(_ id: String, reason why: String, _ request: RESTRequest,
                                            _ core: ServerCore) async -> HTTPResponse {
        guard let sync = core.connectionSync else { return error(404, "no client \(id) is connected to this node") }
        do throws(ParleyError) {
            let nodes = try await sync.roster.nodes(nowMillis: core.hub.clock.nowMillis())
            guard let owner = nodes.first(where: { $0.node != sync.node && $0.clients.contains { $0.id == id } }) else {
                return error(404, "no client \(id) is connected to any node")
            }
            try await sync.roster.requestDisconnect(DisconnectRequest(id: id, reason: why), node: owner.node)
            audit(core, request, "client disconnect requested", ["client": .string(id), "node": .string(owner.node), "reason": .string(why)])
            return json(202) { w in
                w.beginObject()
                w.key("requested"); w.writeString(id)
                w.key("node"); w.writeString(owner.node)
                w.endObject()
            }
        } catch {
            return AdminAPI.error(503, "the cluster cannot be asked: \(error.message)")
        }
    }

    /// `{"name": "alice"}` or `{"ip": "203.0.113.9"}`, with `seconds` (default 3600) and an
    /// optional `reason`: refused at admission (IP) and at every door's identify from now
    /// on; matching clients connected now are disconnected. 201 with the ban.
    @Sendable static func addBan(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let body: JSONObject
        switch bodyObject(request) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        let target: Ban.Target
        switch (body["name"]?.stringValue, body["ip"]?.stringValue) {
        case (let name?, nil) where !Ban.normalized(name).isEmpty && name.count <= 128: target = .name(name)
        case (nil, let ip?) where isIPAddress(ip): target = .ip(ip)
        default: return error(400, "give either name (1-128 characters) or ip (an IPv4 or IPv6 address)")
        }
        var seconds = 3600
        if let raw = body["seconds"] {
            guard let value = raw.intValue, (1...BanList.maxSeconds).contains(value) else {
                return error(400, "seconds must be a whole number in 1...\(BanList.maxSeconds)")
            }
            seconds = value
        }
        let why = reason(body)
        let ban: Ban
        do {
            ban = try await core.banKeeper.add(target, seconds: seconds, reason: why)
        } catch {
            return error.code == .limitReached ? AdminAPI.error(429, error.message) : AdminAPI.error(503, "the ban was not stored: \(error.message)")
        }
        let covered = core.directory.matching(ban.target)
        for client in covered { client.control.run { $0.disconnect(byAdministrator: "banned: \(why)") } }
        audit(core, request, "ban added", [ban.target.kind: .string(ban.target.value), "seconds": .int(seconds),
                                            "reason": .string(why), "disconnected": .int(covered.count)])
        return json(201) { w in
            w.beginObject()
            w.key("ban"); writeBan(ban, &w)
            w.key("disconnected"); w.writeInt(covered.count)
            w.endObject()
        }
    }

    @Sendable static func removeBan(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        guard let id = request.params["id"].flatMap(Int.init) else { return error(400, "the ban id must be a whole number") }
        let found: Bool
        do {
            found = try await core.banKeeper.remove(id: id)
        } catch {
            return AdminAPI.error(503, "the ban was not lifted: \(error.message)")
        }
        guard found else { return error(404, "no ban \(id)") }
        audit(core, request, "ban lifted", ["ban": .int(id)])
        return json { w in
            w.beginObject()
            w.key("lifted"); w.writeInt(id)
            w.endObject()
        }
    }

    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
