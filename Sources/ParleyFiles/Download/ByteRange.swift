/// A `Range` request header (RFC 9110 §14) resolved against a file's size.
///
/// Parley serves single ranges only, which is what resuming downloads and media players ask
/// for; a header it does not serve (several ranges, another unit, bad syntax) is ignored and
/// the whole file is sent, as the RFC allows.
public enum ByteRangeRequest: Sendable, Hashable {
    /// Send the whole file (200).
    case whole
    /// Send these bytes (206), with `Content-Range: bytes a-b/size`.
    case partial(ClosedRange<Int>)
    /// No byte of the file is in the range (416), with `Content-Range: bytes */size`.
    case unsatisfiable

    /// Resolves `header` (the `Range` value, if any) for a file of `size` bytes:
    /// `bytes=a-b` (b clamped to the end), `bytes=a-`, `bytes=-n` (the last n bytes).
    public init(header: String?, size: Int) {
        guard let header else {
            self = .whole
            return
        }
        let trimmed = header.trimmingCharacters()
        guard trimmed.lowercased().hasPrefix("bytes="), size >= 0 else {
            self = .whole
            return
        }
        let spec = trimmed.dropFirst("bytes=".count)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .whole
            return
        }
        let first = spec[..<dash].trimmingSpaces()
        let last = spec[spec.index(after: dash)...].trimmingSpaces()
        switch (ByteRangeRequest.number(first), ByteRangeRequest.number(last)) {
        case (let start?, let end?):
            guard start <= end else {
                self = .whole  // invalid syntax: ignored
                return
            }
            self = start < size ? .partial(start...min(end, size - 1)) : .unsatisfiable
        case (let start?, nil) where last.isEmpty:
            self = start < size ? .partial(start...(size - 1)) : .unsatisfiable
        case (nil, let suffix?) where first.isEmpty:
            guard suffix > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .partial(max(0, size - suffix)...(size - 1))
        default:
            self = .whole
        }
    }

    /// A non-negative decimal; `nil` for anything else (or an overflowing one).
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(text)
    }
}

extension String {
    fileprivate func trimmingCharacters() -> Substring { self[...].trimmingSpaces() }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while let first = s.first, first == " " || first == "\t" { s = s.dropFirst() }
        while let last = s.last, last == " " || last == "\t" { s = s.dropLast() }
        return s
    }
}
