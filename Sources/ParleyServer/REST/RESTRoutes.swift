import ParleyCore
import ParleyHTTP

/// One REST request as a route handler sees it.
struct RESTRequest: Sendable {
    let head: HTTPRequestHead
    let params: [String: String]
    let body: [UInt8]
}

/// A REST route: answers one request using the hub.
typealias RESTHandler = @Sendable (RESTRequest, ServerCore) -> HTTPResponse

/// The Scaledrone-compatible REST API (protocols.md §1); authentication in RESTAuth.swift.
/// Success is 200 with JSON; failures are ≥400 with a text body.
enum RESTRoutes {
    static func router() -> HTTPRouter<RESTHandler> {
        var router = HTTPRouter<RESTHandler>()
        router.add("POST", "/:channel/:room/publish", publishToRoom)
        router.add("POST", "/:channel/publish/rooms", publishToRooms)
        router.add("GET", "/:channel/stats", stats)
        router.add("GET", "/:channel/members", channelMembers)
        router.add("GET", "/:channel/rooms", rooms)
        router.add("GET", "/:channel/:room/members", roomMembers)
        router.add("GET", "/:channel/room-members", roomMemberMap)
        return router
    }

    /// Routes `head` and runs its handler; 404 / 405 as text otherwise.
    static func handle(router: HTTPRouter<RESTHandler>, head: HTTPRequestHead, body: [UInt8], core: ServerCore) -> HTTPResponse {
        switch router.match(method: head.method, path: head.path) {
        case .found(let handler, let params):
            let request = RESTRequest(head: head, params: params, body: body)
            if let refusal = RESTAuth.check(request, core: core) { return refusal }
            return handler(request, core)
        case .methodNotAllowed(let allowed):
            var response = HTTPResponse.text(405, "method not allowed\n")
            response.headers.set("Allow", allowed.joined(separator: ", "))
            return response
        case .notFound:
            return .text(404, "not found\n")
        }
    }

    // MARK: publishing

    @Sendable static func publishToRoom(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        let channel = request.params["channel"] ?? "", room = request.params["room"] ?? ""
        guard RoomKey.isValidName(channel), RoomKey.isValidName(room) else { return .text(400, "invalid channel or room name\n") }
        let body: JSONValue
        switch parseBody(request.body) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        do {
            let message = try core.hub.publish(body, to: RoomKey(channel: channel, room: room), from: nil)
            var w = JSONWriter()
            writeReceipt(message, into: &w, withRoom: false)
            return .json(200, w.bytes)
        } catch {
            return failure(error)
        }
    }

    @Sendable static func publishToRooms(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        let names = request.head.queryValues("r")
        guard RoomKey.isValidName(channel) else { return .text(400, "invalid channel name\n") }
        guard !names.isEmpty else { return .text(400, "name at least one room with ?r=ROOM\n") }
        guard names.allSatisfy(RoomKey.isValidName) else { return .text(400, "invalid room name\n") }
        let body: JSONValue
        switch parseBody(request.body) {
        case .success(let value): body = value
        case .failure(let failure): return failure.response
        }
        var w = JSONWriter()
        w.beginArray()
        for name in names {
            do {
                let message = try core.hub.publish(body, to: RoomKey(channel: channel, room: name), from: nil)
                writeReceipt(message, into: &w, withRoom: true)
            } catch {
                return failure(error)
            }
        }
        w.endArray()
        return .json(200, w.bytes)
    }

    private static func writeReceipt(_ message: Message, into w: inout JSONWriter, withRoom: Bool) {
        w.beginObject()
        if withRoom { w.key("room"); w.writeString(message.room.room) }
        w.key("id"); w.writeString(message.id)
        w.key("offset"); w.writeInt(Int(message.offset))
        w.endObject()
    }

    private static func parseBody(_ bytes: [UInt8]) -> Result<JSONValue, HTTPResponseFailure> {
        guard !bytes.isEmpty else { return .failure(HTTPResponseFailure(.text(400, "the body must be JSON\n"))) }
        do {
            return .success(try JSONParser.parse(bytes))
        } catch {
            return .failure(HTTPResponseFailure(.text(400, "invalid JSON body: \(error.description)\n")))
        }
    }

    private static func failure(_ error: ParleyError) -> HTTPResponse {
        let status = (400...599).contains(error.code.rawValue) && error.code != .limitReached ? error.code.rawValue : 429
        return .text(status, error.message + "\n")
    }

    // MARK: queries

    @Sendable static func stats(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        let channel = request.params["channel"] ?? ""
        var w = JSONWriter()
        w.beginObject()
        w.key("users_count"); w.writeInt(core.hub.clientIDs(in: channel).count)
        w.endObject()
        return .json(200, w.bytes)
    }

    @Sendable static func channelMembers(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        stringArray(core.hub.clientIDs(in: request.params["channel"] ?? ""))
    }

    @Sendable static func rooms(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        stringArray(core.hub.occupiedRooms(in: request.params["channel"] ?? ""))
    }

    @Sendable static func roomMembers(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        let key = RoomKey(channel: request.params["channel"] ?? "", room: request.params["room"] ?? "")
        return stringArray(uniqueIDs(core.hub.members(of: key)))
    }

    @Sendable static func roomMemberMap(_ request: RESTRequest, _ core: ServerCore) -> HTTPResponse {
        var w = JSONWriter()
        w.beginObject()
        for (room, members) in core.hub.roomMembers(in: request.params["channel"] ?? "") {
            w.key(room)
            w.beginArray()
            for id in uniqueIDs(members) { w.writeString(id) }
            w.endArray()
        }
        w.endObject()
        return .json(200, w.bytes)
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
