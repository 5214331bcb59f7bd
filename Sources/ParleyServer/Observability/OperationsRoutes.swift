import Foundation
import ParleyCore
import ParleyHTTP

/// A request for one of the operator's endpoints, routed.
struct OperationsRoute: Sendable {
    let handler: RESTHandler
    let params: [String: String]
    /// Load-balancer probes, and requests carrying the right token, are not counted against
    /// the REST rate limit; everything else is (a wrong token included).
    let exemptFromRateLimit: Bool
}

/// `/healthz`, `/readyz`, `/metrics` and the admin API (`/admin/api/…`).
enum OperationsRoutes {
    static func route(_ head: HTTPRequestHead, core: ServerCore) -> OperationsRoute? {
        switch head.path {
        case "/healthz":
            return OperationsRoute(handler: readOnly(health), params: [:], exemptFromRateLimit: true)
        case "/readyz":
            return OperationsRoute(handler: readOnly(ready), params: [:], exemptFromRateLimit: true)
        case "/metrics":
            guard let token = core.configuration.metricsToken else {
                return OperationsRoute(handler: readOnly(metrics), params: [:], exemptFromRateLimit: false)
            }
            guard carries(head, token: token) else {
                return OperationsRoute(handler: { request, core in
                    core.logAuthFailure(door: .http, remote: request.remote, reason: "/metrics: missing or wrong bearer token")
                    return unauthorized("/metrics needs Authorization: Bearer <metrics token>")
                }, params: [:], exemptFromRateLimit: false)
            }
            return OperationsRoute(handler: readOnly(metrics), params: [:], exemptFromRateLimit: true)
        default:
            guard head.path == "/admin/api" || head.path.hasPrefix("/admin/api/") else { return nil }
            return AdminAPI.route(head, core: core)
        }
    }

    /// The token of `Authorization: Bearer TOKEN`, compared by the caller.
    static func bearer(_ head: HTTPRequestHead) -> String? {
        guard let header = head.headers["Authorization"] else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }

    /// Whether `head` carries `token` as its bearer token (constant time).
    static func carries(_ head: HTTPRequestHead, token: String) -> Bool {
        guard let sent = bearer(head) else { return false }
        return constantTimeEqual(Array(sent.utf8), Array(token.utf8))
    }

    static func unauthorized(_ message: String) -> HTTPResponse {
        var response = HTTPResponse.text(401, message + "\n")
        response.headers.set("WWW-Authenticate", "Bearer realm=\"parley\"")
        return response
    }

    /// GET and HEAD only (405 otherwise).
    private static func readOnly(_ handler: @escaping RESTHandler) -> RESTHandler {
        { request, core in
            guard request.head.method == "GET" || request.head.method == "HEAD" else {
                var response = HTTPResponse.text(405, "method not allowed\n")
                response.headers.set("Allow", "GET, HEAD")
                return response
            }
            return await handler(request, core)
        }
    }

    /// The process is up and its loops answer (this very request was served by one).
    @Sendable static func health(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        var response = HTTPResponse.text(200, "ok\n")
        response.headers.set("Cache-Control", "no-store")
        return response
    }

    /// 200 when every readiness check passes (the store; Redis in cluster mode), 503 with
    /// the reasons otherwise, and 503 at once while the server drains before stopping.
    @Sendable static func ready(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        let (ready, lines) = await core.readiness.evaluate()
        var response = HTTPResponse.text(ready ? 200 : 503, ([ready ? "ready" : "not ready"] + lines).joined(separator: "\n") + "\n")
        response.headers.set("Cache-Control", "no-store")
        if !ready { response.headers.set("Retry-After", "5") }
        return response
    }

    @Sendable static func metrics(_ request: RESTRequest, _ core: ServerCore) async -> HTTPResponse {
        var response = HTTPResponse.text(200, core.metricsText())
        response.headers.set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        response.headers.set("Cache-Control", "no-store")
        return response
    }
}
