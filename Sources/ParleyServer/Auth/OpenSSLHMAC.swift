import COpenSSL
import ParleyCore

/// HMAC-SHA256 through OpenSSL, for token signatures.
public struct OpenSSLHMAC: HMACSHA256 {
    public init() {}

    public func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        key.withUnsafeBufferPointer { key in
            message.withUnsafeBufferPointer { message in
                _ = HMAC(EVP_sha256(), key.baseAddress, Int32(key.count), message.baseAddress, message.count, &out, &length)
            }
        }
        return Array(out[0..<Int(length)])
    }
}
