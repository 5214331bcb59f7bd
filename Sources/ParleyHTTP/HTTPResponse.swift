import Foundation

/// A complete HTTP response to encode and write.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code, e.g. 200.
    public var status: Int
    /// Header fields; `encoded` adds Content-Length, Connection and Server as needed.
    public var headers: HTTPHeaders
    /// The body bytes (left out on the wire for 1xx, 204 and 304).
    public var body: [UInt8]

    /// A response with `status`, `headers` and `body`.
    public init(status: Int, headers: HTTPHeaders = .init(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array(text.utf8))
    }

    /// An `application/json` response with already-encoded `bytes`.
    public static func json(_ status: Int, _ bytes: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: bytes)
    }

    /// Whether a response with `status` never carries a body (RFC 9110 §6.4.1).
    public static func statusForbidsBody(_ status: Int) -> Bool {
        (100..<200).contains(status) || status == 204 || status == 304
    }

    /// The response as wire bytes: status line with reason phrase, the headers, then the body.
    ///
    /// Adds `Content-Length` (unless the status forbids a body or the headers already set
    /// one, as a HEAD response does), `Connection: close` when `keepAlive` is false (replacing
    /// any Connection field), `Server: parley` and `Date` when given and not already set.
    /// CR, LF and NUL in names or values are replaced by spaces so a header built from user
    /// input cannot split the response.
    public func encoded(keepAlive: Bool, date: String? = nil) -> [UInt8] {
        let noBody = Self.statusForbidsBody(status)
        var out: [UInt8] = []
        out.reserveCapacity(128 + headers.count * 32 + (noBody ? 0 : body.count))
        out.append(contentsOf: "HTTP/1.1 \(status) \(httpReasonPhrase(status))\r\n".utf8)
        func field(_ name: String, _ value: String) {
            appendSanitized(name, to: &out)
            out.append(contentsOf: ": ".utf8)
            appendSanitized(value, to: &out)
            out.append(contentsOf: "\r\n".utf8)
        }
        var hasLength = false, hasServer = false, hasDate = false
        for (name, value) in headers {
            if httpNameEquals(name, "Connection") && !keepAlive { continue }
            if httpNameEquals(name, "Content-Length") {
                if noBody && status != 304 { continue }
                hasLength = true
            }
            if httpNameEquals(name, "Server") { hasServer = true }
            if httpNameEquals(name, "Date") { hasDate = true }
            field(name, value)
        }
        if !noBody && !hasLength { field("Content-Length", String(body.count)) }
        if !keepAlive { field("Connection", "close") }
        if !hasServer { field("Server", "parley") }
        if let date, !hasDate { field("Date", date) }
        out.append(contentsOf: "\r\n".utf8)
        if !noBody { out.append(contentsOf: body) }
        return out
    }
}

private func appendSanitized(_ s: String, to out: inout [UInt8]) {
    for c in s.utf8 { out.append(c == CR || c == LF || c == 0 ? SP : c) }
}

/// The standard reason phrase for `status` ("OK", "Not Found", ...), or a generic one by class.
public func httpReasonPhrase(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 101: "Switching Protocols"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 206: "Partial Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 303: "See Other"
    case 304: "Not Modified"
    case 307: "Temporary Redirect"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 406: "Not Acceptable"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 410: "Gone"
    case 411: "Length Required"
    case 412: "Precondition Failed"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 416: "Range Not Satisfiable"
    case 417: "Expectation Failed"
    case 422: "Unprocessable Content"
    case 426: "Upgrade Required"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    case 100..<200: "Informational"
    case 200..<300: "Success"
    case 300..<400: "Redirection"
    case 400..<500: "Client Error"
    default: "Server Error"
    }
}

/// `date` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) for Date / Last-Modified.
///
/// Computed by hand rather than with `DateFormatter`, which is neither cheap nor Sendable.
public func httpDate(_ date: Date) -> String {
    let seconds = Int(date.timeIntervalSince1970.rounded(.down))
    var days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
    let secOfDay = seconds - days * 86400
    let weekday = ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday (index 4, Sunday = 0)
    // Civil-from-days (Howard Hinnant).
    days += 719_468
    let era = (days >= 0 ? days : days - 146_096) / 146_097
    let doe = days - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    let names = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(names[weekday]), \(two(day)) \(months[month - 1]) \(year) "
        + "\(two(secOfDay / 3600)):\(two(secOfDay / 60 % 60)):\(two(secOfDay % 60)) GMT"
}
