import ParleyHTTP
import ParleyIO

extension IPRateLimiter {
    /// Takes a token for `connection`'s client address: nil when the request may go on, else
    /// (the breach counted as `limit`) the 429 that says so, `too many WHAT (limit N per
    /// second per address); slow down`, with `Retry-After`. One wording and one count for
    /// every per-address request rate (REST, downloads, Socket.IO polls).
    func refusal(of connection: TCPConnection, _ what: String, counting limit: Limit, in core: ServerCore) -> HTTPResponse? {
        guard !allow(ip: connection.clientIP, nowMillis: core.hub.clock.nowMillis()) else { return nil }
        core.limits.breached(limit, remote: connection.remoteAddress)
        var response = HTTPResponse.text(429, "too many \(what) (limit \(Int(ratePerSecond)) per second per address); slow down\n")
        response.headers.set("Retry-After", String(retryAfterSeconds))
        return response
    }
}
