import Foundation
import ParleyCore
import ParleyFiles
import ParleyHTTP

/// The file endpoints of the HTTP door. They stream, so ``HTTPSession`` routes them itself
/// rather than through the REST router (whose handlers answer with a whole body):
///
/// - `POST /{channel}/files[?room=ROOM&name=NAME]`: upload (``UploadReceiver``);
/// - `GET|HEAD /{channel}/files/{id}` and `/{channel}/files/{id}/thumbnail`: download
///   (``DownloadStreamer``).
///
/// An upload id is 32 hex digits, so `GET /{channel}/files/members` (the members of a room
/// named "files") still reaches the REST API.
enum FileRoutes {
    /// The channel of an upload request (`POST /{channel}/files`), nil for anything else.
    static func uploadChannel(_ head: HTTPRequestHead) -> String? {
        guard head.method == "POST" else { return nil }
        let parts = segments(head.path)
        guard parts.count == 2, parts[1] == "files" else { return nil }
        return String(parts[0])
    }

    /// What a download request asks for, nil for anything else.
    static func download(_ head: HTTPRequestHead) -> (channel: String, id: String, thumbnail: Bool)? {
        guard head.method == "GET" || head.method == "HEAD" else { return nil }
        let parts = segments(head.path)
        guard parts.count == 3 || (parts.count == 4 && parts[3] == "thumbnail"), parts[1] == "files",
              UploadRegistry.isValidID(parts[2]) else { return nil }
        return (String(parts[0]), String(parts[2]), parts.count == 4)
    }

    /// The parser's body limit: upload requests get the files' own.
    static func bodyLimit(_ files: ServerFiles) -> @Sendable (HTTPRequestHead) -> Int? {
        let limit = files.maxRequestBytes
        return { head in uploadChannel(head) != nil ? limit : nil }
    }

    private static func segments(_ path: String) -> [Substring] {
        var path = Substring(path)
        if path.first == "/" { path = path.dropFirst() }
        return path.split(separator: "/", omittingEmptySubsequences: false)
    }

    /// A text answer (every file error is text), with `Retry-After` for 429 and 503.
    static func text(_ status: Int, _ message: String, retryAfter: Int? = nil) -> HTTPResponse {
        var response = HTTPResponse.text(status, message + "\n")
        if let retryAfter { response.headers.set("Retry-After", String(retryAfter)) }
        return response
    }

    static func response(_ error: FileError) -> HTTPResponse {
        let status = error.code.httpStatus
        return text(status, error.message, retryAfter: status == 503 ? 1 : nil)
    }
}

/// Who may download the files of a channel, from the request's credentials.
///
/// Downloads use the same credentials as the rest of the channel: nothing on open channels;
/// on channels that require auth, the JWT (as `Authorization: Bearer`, or `?token=` where a
/// header cannot be set, e.g. an `<img>`) whose permissions allow subscribing to, or reading
/// the history of, a room the file was uploaded for or published in; or the channel's secret
/// (`Basic`, for backends). README.md, "Files and images", says why.
enum DownloadAccess {
    case anyone
    case secret
    case token(TokenClaims)

    /// The access these credentials give, or the refusal to answer with.
    static func check(_ head: HTTPRequestHead, channel: String, core: ServerCore) -> Result<DownloadAccess, HTTPResponseFailure> {
        if let refusal = core.configuration.refusal(ofChannel: channel) { return .failure(HTTPResponseFailure(.text(404, refusal + "\n"))) }
        let settings = core.configuration.settings(ofChannel: channel)
        var scheme = "", credentials = ""
        if let header = head.headers["Authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
            guard parts.count == 2 else { return .failure(HTTPResponseFailure(RESTAuth.unauthorized("malformed Authorization header"))) }
            scheme = parts[0].lowercased()
            credentials = parts[1].trimmingCharacters(in: .whitespaces)
        } else if let token = head.query("token"), !token.isEmpty {
            scheme = "bearer"
            credentials = token
        } else {
            guard settings?.requireAuth != true else {
                return .failure(HTTPResponseFailure(RESTAuth.unauthorized("channel \"\(channel)\" requires authentication: send Authorization: Bearer <JWT> (or ?token=JWT)")))
            }
            return .success(.anyone)
        }
        guard let secret = settings?.secret else {
            return .failure(HTTPResponseFailure(RESTAuth.unauthorized("channel \"\(channel)\" does not use authentication (no secret is configured for it)")))
        }
        switch scheme {
        case "basic":
            guard let data = Data(base64Encoded: credentials),
                  constantTimeEqual(Array(data), Array("\(channel):\(secret)".utf8)) else {
                return .failure(HTTPResponseFailure(RESTAuth.unauthorized("wrong channel or secret")))
            }
            return .success(.secret)
        case "bearer":
            let verifier = TokenVerifier(hmac: OpenSSLHMAC(), clock: core.hub.clock)
            do throws(ParleyError) {
                return .success(.token(try verifier.verify(credentials, secret: secret, channel: channel, client: .any)))
            } catch {
                return .failure(HTTPResponseFailure(RESTAuth.unauthorized(error.message)))
            }
        default:
            return .failure(HTTPResponseFailure(RESTAuth.unauthorized("unsupported Authorization scheme (use Bearer or Basic)")))
        }
    }

    /// Whether a token may read a file known in `rooms` (where it was uploaded for and
    /// published in); nil when it may, else the refusal.
    func refusal(rooms: [String]) -> HTTPResponse? {
        guard case .token(let claims) = self else { return nil }
        let readable = rooms.contains { room in
            // A direct room is its users' alone, whatever the token's patterns allow.
            guard ChatRules.roomRefusal(room, user: claims.user) == nil, let permission = claims.permission(for: room) else { return false }
            return permission.subscribe || permission.history > 0
        }
        return readable ? nil
            : .text(403, "permission denied: the token allows reading none of the rooms this file was shared in\n")
    }
}
