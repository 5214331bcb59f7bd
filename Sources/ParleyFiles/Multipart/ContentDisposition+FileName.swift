// Kept apart from MultipartHeaders.swift, which compiles on its own for the fuzz target.
extension ContentDisposition {
    /// The file name a `Content-Disposition` value names (`filename*` before `filename`),
    /// as sent: sanitize it with ``FileName/sanitized(_:)``. Nil when there is none or the
    /// value is malformed. A raw upload body may carry its name this way.
    public static func fileName(fromHeader value: String) -> String? {
        guard let disposition = MultipartHeaders.parseParameterized(value) else { return nil }
        if let extended = disposition.parameter("filename*"), let decoded = MultipartHeaders.decodeExtendedValue(extended) {
            return decoded
        }
        return disposition.parameter("filename")
    }
}
