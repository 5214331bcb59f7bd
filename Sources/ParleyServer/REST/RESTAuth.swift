import Foundation
import ParleyCore
import ParleyHTTP

/// REST authentication (docs/protocols.md, "REST"): `Authorization: Basic base64(channel:secret)` or
/// `Bearer <JWT>` signed with the channel's secret. Open channels need none, but credentials
/// that are sent are always checked. Failures are 401 with a text body and
/// `WWW-Authenticate`; a valid token without the permission is 403.
enum RESTAuth {
    /// Whether a request that passed ``check(_:core:)`` may moderate `room` (edit and delete
    /// any message): with the channel's secret (Basic), or a token whose permission for the
    /// room has `moderate`. Without credentials (an open channel) it may not.
    static func moderates(_ request: RESTRequest, room: String, core: ServerCore) -> Bool {
        guard let channel = request.params["channel"], let header = request.head.headers["Authorization"],
              let secret = core.configuration.settings(ofChannel: channel)?.secret else { return false }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return false }
        let credentials = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: credentials) else { return false }
            return constantTimeEqual(Array(data), Array("\(channel):\(secret)".utf8))
        case "bearer":
            let verifier = TokenVerifier(hmac: OpenSSLHMAC(), clock: core.hub.clock)
            guard let claims = try? verifier.verify(credentials, secret: secret, channel: channel, client: .any) else { return false }
            return claims.permission(for: room)?.moderate == true
        default:
            return false
        }
    }

    /// Nil when the request may proceed, else the response to send.
    static func check(_ request: RESTRequest, core: ServerCore) -> HTTPResponse? {
        guard let channel = request.params["channel"] else { return nil }
        if let refusal = core.configuration.refusal(ofChannel: channel) { return .text(404, refusal + "\n") }
        let settings = core.configuration.settings(ofChannel: channel)
        // The rooms the request names: the path's, or a multi-room publish's `?r=`.
        let rooms = request.params["room"].map { [$0] } ?? request.head.queryValues("r")
        guard let header = request.head.headers["Authorization"] else {
            guard settings?.requireAuth != true else {
                return unauthorized("channel \"\(channel)\" requires authentication: send Authorization: Basic base64(channel:secret) or Bearer <JWT>")
            }
            return reservedRefusal(rooms)
        }
        guard let secret = settings?.secret else {
            return unauthorized("channel \"\(channel)\" does not use authentication (no secret is configured for it)")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return unauthorized("malformed Authorization header") }
        let credentials = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: credentials) else { return unauthorized("Basic credentials are not base64") }
            let expected = Array("\(channel):\(secret)".utf8)
            guard constantTimeEqual(Array(data), expected) else { return unauthorized("wrong channel or secret") }
            return reservedRefusal(rooms)
        case "bearer":
            let verifier = TokenVerifier(hmac: OpenSSLHMAC(), clock: core.hub.clock)
            let claims: TokenClaims
            do {
                claims = try verifier.verify(credentials, secret: secret, channel: channel, client: .any)
            } catch {
                return unauthorized(error.message)
            }
            // The rooms of the server's own (`~`) are nobody's, and a direct room is its users'
            // alone: as on every door, whatever the token's room patterns allow.
            for room in rooms {
                if let refusal = ChatRules.roomRefusal(room, user: claims.user) {
                    return .text(403, "permission denied: \(refusal.message)\n")
                }
            }
            // Publishing needs the publish permission in every room named; queries need only a
            // valid token of the channel.
            guard request.head.method == "POST" else { return nil }
            for room in rooms where claims.permission(for: room)?.publish != true {
                return .text(403, "permission denied: the token does not allow publishing to room \"\(room)\"\n")
            }
            return nil
        default:
            return unauthorized("unsupported Authorization scheme (use Basic or Bearer)")
        }
    }

    /// The server's own rooms (`~`) are nobody's, not even the server's over REST: 403 when
    /// the request names one. (Direct rooms are the server's to use with the channel's
    /// secret, and anyone's on an open channel, where a user id proves nothing.)
    static func reservedRefusal(_ rooms: [String]) -> HTTPResponse? {
        guard let room = rooms.first(where: ReservedRoom.isReserved),
              let refusal = ChatRules.roomRefusal(room, user: nil) else { return nil }
        return .text(403, "permission denied: \(refusal.message)\n")
    }

    static func unauthorized(_ message: String) -> HTTPResponse {
        var response = HTTPResponse.text(401, message + "\n")
        response.headers.set("WWW-Authenticate", "Basic realm=\"parley\", Bearer realm=\"parley\"")
        return response
    }
}
