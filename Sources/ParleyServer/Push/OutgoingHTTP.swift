import Foundation
import CCurl
import ParleyCore

/// One outgoing HTTP request of the push providers.
struct OutgoingRequest: Sendable {
    var url: String
    var method = "POST"
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// Ask for HTTP/2 (APNs requires it; others take it when offered over TLS).
    var http2 = false
    /// PEM certificates to trust instead of the system's (a test's own push service).
    var caFile: String?
    var timeoutMillis = 10_000
}

struct OutgoingResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// How long a 429 or 5xx asks to wait: `Retry-After` in seconds (at most an hour), or
    /// `fallback`.
    func retryAfterMillis(default fallback: Int64) -> Int64 {
        guard let seconds = header("retry-after").flatMap({ Int64($0.trimmingCharacters(in: .whitespaces)) }), seconds >= 0 else { return fallback }
        return min(seconds, 3_600) * 1000
    }
}

/// Outgoing HTTP(S) through libcurl (HTTP/2 by nghttp2), blocking: called on the push
/// worker's own thread, never on an event loop. Only http and https, no redirects, a bounded
/// response (a provider's answers are small).
enum OutgoingHTTP {
    /// Most response bytes kept (the rest is cut off and the request fails).
    static let maxResponseBytes = 64 << 10

    /// `curl_global_init` is not thread-safe: it runs once, before the first request.
    private static let initialized: Bool = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK }()

    private final class Collector {
        var body: [UInt8] = []
        var headers: [(String, String)] = []
        var overflow = false
    }

    static func send(_ request: OutgoingRequest) -> Result<OutgoingResponse, ParleyError> {
        guard initialized, let curl = curl_easy_init() else { return .failure(ParleyError(.internalError, "libcurl did not start")) }
        defer { curl_easy_cleanup(curl) }
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for (name, value) in request.headers where !name.contains(":") && !value.contains("\r") && !value.contains("\n") {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        // "Expect: 100-continue" would cost a round trip on every push.
        list = curl_slist_append(list, "Expect:")
        let collector = Collector()
        let context = Unmanaged.passUnretained(collector).toOpaque()
        let body = request.body
        return body.withUnsafeBufferPointer { bytes -> Result<OutgoingResponse, ParleyError> in
            _ = parley_curl_setopt_string(curl, CURLOPT_URL, request.url)
            _ = parley_curl_setopt_string(curl, CURLOPT_PROTOCOLS_STR, "http,https")
            _ = parley_curl_setopt_long(curl, CURLOPT_FOLLOWLOCATION, 0)
            _ = parley_curl_setopt_long(curl, CURLOPT_NOSIGNAL, 1)
            _ = parley_curl_setopt_long(curl, CURLOPT_TIMEOUT_MS, request.timeoutMillis)
            _ = parley_curl_setopt_long(curl, CURLOPT_CONNECTTIMEOUT_MS, min(request.timeoutMillis, 5_000))
            _ = parley_curl_setopt_string(curl, CURLOPT_CUSTOMREQUEST, request.method)
            if request.method == "POST" || !body.isEmpty {
                _ = parley_curl_setopt_long(curl, CURLOPT_POST, 1)
                _ = parley_curl_setopt_pointer(curl, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
                _ = parley_curl_setopt_long(curl, CURLOPT_POSTFIELDSIZE, body.count)
            }
            _ = parley_curl_setopt_pointer(curl, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list))
            _ = parley_curl_setopt_long(curl, CURLOPT_HTTP_VERSION, Int(request.http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1))
            if let caFile = request.caFile { _ = parley_curl_setopt_string(curl, CURLOPT_CAINFO, caFile) }
            _ = parley_curl_setopt_write(curl, { data, size, count, context in
                let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                guard collector.body.count + length <= OutgoingHTTP.maxResponseBytes else {
                    collector.overflow = true
                    return 0
                }
                data.map { collector.body.append(contentsOf: UnsafeRawBufferPointer(start: $0, count: length)) }
                return length
            }, context)
            _ = parley_curl_setopt_header(curl, { data, size, count, context in
                let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                let length = size * count
                guard let data, collector.headers.count < 100 else { return length }
                let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                if let colon = line.firstIndex(of: ":") {
                    let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
                    let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespacesAndNewlines)
                    collector.headers.append((name, value))
                } else if line.hasPrefix("HTTP/") {
                    collector.headers.removeAll()  // a new response (after a 100, say): its own headers
                }
                return length
            }, context)
            let code = curl_easy_perform(curl)
            guard code == CURLE_OK else {
                let what = collector.overflow ? "the answer was larger than \(maxResponseBytes) bytes" : String(cString: curl_easy_strerror(code))
                return .failure(ParleyError(.unavailable, "\(request.method) \(hostOf(request.url)): \(what)"))
            }
            return .success(OutgoingResponse(status: parley_curl_response_code(curl), headers: collector.headers, body: collector.body))
        }
    }

    /// The host of `url`, for messages (never the path, which may hold a token).
    static func hostOf(_ url: String) -> String {
        guard let start = url.range(of: "://")?.upperBound else { return "?" }
        return String(url[start...].prefix { $0 != "/" && $0 != "?" })
    }
}
