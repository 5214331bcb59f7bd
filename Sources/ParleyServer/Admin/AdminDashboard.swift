import ParleyHTTP

/// The admin dashboard (`Sources/ParleyServer/Web/admin`, hand-written HTML/CSS/JS, no build
/// step, no CDN), served at `/admin`. Embedded in the binary like the chat client
/// (``WebClient``), with a stricter policy of its own.
enum AdminDashboard {
    /// Same origin only; the page talks to `/admin/api/` and nothing else.
    static let contentSecurityPolicy =
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

    /// The response for a GET/HEAD of `/admin`, `/admin/` or `/admin/FILE`, or nil.
    static func response(for head: HTTPRequestHead) -> HTTPResponse? {
        let path: String
        switch head.path {
        case "/admin", "/admin/": path = "admin/index.html"
        case let other where other.hasPrefix("/admin/") && !other.hasPrefix("/admin/api"):
            path = String(other.dropFirst())
        default: return nil
        }
        return WebClient.response(for: head, asset: path, contentSecurityPolicy: contentSecurityPolicy,
                                  extraHeaders: [("X-Frame-Options", "DENY")])
    }
}
