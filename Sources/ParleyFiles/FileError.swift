/// Why a file operation failed: a stable code a door maps to its protocol (``Code/httpStatus``
/// for HTTP) and a message a person reads.
public struct FileError: Error, Hashable, Sendable, CustomStringConvertible {
    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(message) [\(code.rawValue)]" }

    /// Stable error codes (never renamed); each maps to one HTTP status.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The file, or an image's pixel count or side, is over a limit: 413.
        public static let tooLarge = Code(rawValue: "too_large")
        /// The type is not allowed here (or is not one Parley can handle): 415.
        public static let unsupportedType = Code(rawValue: "unsupported_type")
        /// It claims to be an image but does not decode as one: 415.
        public static let invalidImage = Code(rawValue: "invalid_image")
        /// An upload quota or rate limit is used up: 429.
        public static let quota = Code(rawValue: "quota")
        /// The request is malformed (e.g. a broken multipart body): 400.
        public static let badRequest = Code(rawValue: "bad_request")
        /// No such file: 404.
        public static let notFound = Code(rawValue: "not_found")
        /// A byte range outside the file: 416.
        public static let rangeNotSatisfiable = Code(rawValue: "range_not_satisfiable")
        /// The worker queue is full; try again later: 503.
        public static let busy = Code(rawValue: "busy")
        /// The disk or the image library failed: 500.
        public static let io = Code(rawValue: "io")

        /// The HTTP status a door answers with.
        public var httpStatus: Int {
            switch self {
            case .tooLarge: 413
            case .unsupportedType, .invalidImage: 415
            case .quota: 429
            case .badRequest: 400
            case .notFound: 404
            case .rangeNotSatisfiable: 416
            case .busy: 503
            default: 500
            }
        }

        public var description: String { rawValue }
    }
}
