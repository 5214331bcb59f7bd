/// A domain error: a stable code every door maps to its protocol's shape, and a message a
/// person can read.
public struct ParleyError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [\(code.name) \(code.rawValue)]" }

    /// Stable error codes (documented in README; never renumbered).
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: Int
        public let name: String
        public init(rawValue: Int) {
            self.rawValue = rawValue
            self.name = Code.names[rawValue] ?? "error"
        }
        private init(_ rawValue: Int, _ name: String) {
            self.rawValue = rawValue
            self.name = name
        }

        public static let badRequest = Code(400, "bad_request")
        public static let unauthorized = Code(401, "unauthorized")
        public static let forbidden = Code(403, "forbidden")
        public static let notFound = Code(404, "not_found")
        public static let conflict = Code(409, "conflict")
        public static let tooLarge = Code(413, "too_large")
        public static let rateLimited = Code(429, "rate_limited")
        public static let limitReached = Code(430, "limit_reached")
        public static let internalError = Code(500, "internal")
        public static let unavailable = Code(503, "unavailable")

        private static let names: [Int: String] = [
            400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
            413: "too_large", 429: "rate_limited", 430: "limit_reached", 500: "internal", 503: "unavailable",
        ]
    }
}
