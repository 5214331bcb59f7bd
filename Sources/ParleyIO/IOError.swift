import CLibUV

/// An I/O failure with libuv's stable error name (e.g. `EADDRINUSE`) and a human message.
public struct IOError: Error, Sendable, Hashable, CustomStringConvertible {
    /// libuv's negative error number, or 0 when the error did not come from libuv.
    public let code: Int32
    public let message: String

    public init(code: Int32 = 0, message: String) {
        self.code = code
        self.message = message
    }

    /// Wraps a libuv status code (`< 0`).
    init(uv code: Int32, _ what: String) {
        self.code = code
        let name = String(cString: uv_err_name(code))
        let text = String(cString: uv_strerror(code))
        self.message = "\(what): \(name) (\(text))"
    }

    public var description: String { message }
}
