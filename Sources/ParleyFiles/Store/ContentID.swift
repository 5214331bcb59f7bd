/// The name of stored bytes: the lowercase hex SHA-256 of the content.
///
/// Equal bytes get equal ids, which is what makes storage deduplicate. An id only ever comes
/// from hashing or from ``init(hex:)``, which accepts exactly 64 lowercase hex digits, so an
/// id taken from a URL can never name a path outside the store.
public struct ContentID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// 64 lowercase hex digits.
    public let hex: String

    /// The id spelled by `hex`; `nil` unless it is exactly 64 lowercase hex digits.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64, utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            return nil
        }
        self.hex = String(decoding: utf8, as: UTF8.self)
    }

    /// The id of a 32-byte digest.
    init(digest: [UInt8]) {
        precondition(digest.count == 32, "SHA-256 digests are 32 bytes")
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        hex = String(decoding: text, as: UTF8.self)
    }

    /// A strong HTTP entity tag: the content never changes under its id.
    public var etag: String { "\"\(hex)\"" }

    public var description: String { hex }

    public static func < (a: ContentID, b: ContentID) -> Bool { a.hex < b.hex }
}
