import COpenSSL

/// SHA-1 from OpenSSL, for the two places a protocol names it: the WebSocket handshake's
/// `Sec-WebSocket-Accept` (RFC 6455 §4.2.2) and the digest Redis's `EVALSHA` names a script
/// by. Neither is a security use; the protocols picked the hash.
public enum SHA1Digest {
    /// The 20-byte digest of `input`.
    public static func bytes(of input: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        input.withUnsafeBufferPointer { inp in
            digest.withUnsafeMutableBufferPointer { out in
                _ = SHA1(inp.baseAddress, inp.count, out.baseAddress)
            }
        }
        return digest
    }

    /// The lowercase hex digest of `input` (what Redis's `SCRIPT LOAD` returns).
    public static func hex(of input: [UInt8]) -> String {
        bytes(of: input).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
