import ParleyIO
import Testing

@Suite struct SHA1DigestTests {
    @Test func knownDigests() throws {
        // FIPS 180 test vectors.
        #expect(SHA1Digest.hex(of: []) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(SHA1Digest.hex(of: Array("abc".utf8)) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA1Digest.hex(of: Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(SHA1Digest.hex(of: Array(repeating: UInt8(ascii: "a"), count: 1_000_000)) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
        #expect(SHA1Digest.bytes(of: Array("abc".utf8)).count == 20)
    }
}
