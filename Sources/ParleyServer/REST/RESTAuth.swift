import Foundation
import ParleyCore
import ParleyHTTP

/// REST authentication (docs/protocols.md, "REST"): `Authorization: Basic base64(channel:secret)` or
/// `Bearer <JWT>` signed with the channel's secret. Open channels need none, but credentials
/// that are sent are always checked. Failures are 401 with a text body and
/// `WWW-Authenticate`; a valid token without the permission is 403.
enum RESTAuth {
    /// Who a request that passed ``access(_:core:)`` speaks as.
    enum Access: Sendable {
        /// No credentials (an open channel, or no channel in the path).
        case anonymous
        /// The channel's secret (Basic): the server.
        case secret
        /// A verified token.
        case token(TokenClaims)

        /// The token's claims, when it came with one.
        var claims: TokenClaims? { if case .token(let claims) = self { claims } else { nil } }

        /// Whether it may moderate `room` (edit and delete any message): the channel's
        /// secret, or a token whose permission for the room has `moderate`. Without
        /// credentials (an open channel) nobody moderates.
        func moderates(_ room: String) -> Bool {
            switch self {
            case .anonymous: false
            case .secret: true
            case .token(let claims): claims.permission(for: room)?.moderate == true
            }
        }
    }

    /// Nil when the request may proceed, else the response to send.
    static func check(_ request: RESTRequest, core: ServerCore) -> HTTPResponse? {
        if case .failure(let refusal) = access(request, core: core) { return refusal.response }
        return nil
    }

    /// Who the request speaks as, its credentials checked once, or the response to send.
    static func access(_ request: RESTRequest, core: ServerCore) -> Result<Access, HTTPResponseFailure> {
        func refuse(_ response: HTTPResponse?) -> Result<Access, HTTPResponseFailure>? { response.map { .failure(HTTPResponseFailure($0)) } }
        guard let channel = request.params["channel"] else { return .success(.anonymous) }
        if let refusal = core.configuration.refusal(ofChannel: channel) { return .failure(HTTPResponseFailure(.text(404, refusal + "\n"))) }
        let settings = core.configuration.settings(ofChannel: channel)
        // The rooms the request names: the path's, or a multi-room publish's `?r=`.
        let rooms = request.params["room"].map { [$0] } ?? request.head.queryValues("r")
        guard let header = request.head.headers["Authorization"] else {
            guard settings?.requireAuth != true else {
                return .failure(HTTPResponseFailure(unauthorized("channel \"\(channel)\" requires authentication: send Authorization: Basic base64(channel:secret) or Bearer <JWT>")))
            }
            return refuse(reservedRefusal(rooms)) ?? .success(.anonymous)
        }
        guard let secret = settings?.secret else {
            return .failure(HTTPResponseFailure(unauthorized("channel \"\(channel)\" does not use authentication (no secret is configured for it)")))
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2 else { return .failure(HTTPResponseFailure(unauthorized("malformed Authorization header"))) }
        let credentials = parts[1].trimmingCharacters(in: .whitespaces)
        switch parts[0].lowercased() {
        case "basic":
            guard let data = Data(base64Encoded: credentials) else { return .failure(HTTPResponseFailure(unauthorized("Basic credentials are not base64"))) }
            let expected = Array("\(channel):\(secret)".utf8)
            guard constantTimeEqual(Array(data), expected) else { return .failure(HTTPResponseFailure(unauthorized("wrong channel or secret"))) }
            return refuse(reservedRefusal(rooms)) ?? .success(.secret)
        case "bearer":
            let verifier = TokenVerifier(hmac: OpenSSLHMAC(), clock: core.hub.clock)
            let claims: TokenClaims
            do {
                claims = try verifier.verify(credentials, secret: secret, channel: channel, client: .any)
            } catch {
                return .failure(HTTPResponseFailure(unauthorized(error.message)))
            }
            // The rooms of the server's own (`~`) are nobody's, and a direct room is its users'
            // alone: as on every door, whatever the token's room patterns allow.
            for room in rooms {
                if let refusal = ChatRules.roomRefusal(room, user: claims.user) {
                    return .failure(HTTPResponseFailure(.text(403, "permission denied: \(refusal.message)\n")))
                }
            }
            // Publishing needs the publish permission in every room named; queries need only a
            // valid token of the channel.
            if request.head.method == "POST" {
                for room in rooms where claims.permission(for: room)?.publish != true {
                    return .failure(HTTPResponseFailure(.text(403, "permission denied: the token does not allow publishing to room \"\(room)\"\n")))
                }
            }
            return .success(.token(claims))
        default:
            return .failure(HTTPResponseFailure(unauthorized("unsupported Authorization scheme (use Basic or Bearer)")))
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
