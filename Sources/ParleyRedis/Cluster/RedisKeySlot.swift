/// Redis Cluster's key-to-slot function: CRC16 (XMODEM) of the key modulo 16384, where a key
/// holding a non-empty `{hash tag}` hashes only the tag. Parley gives all of a room's keys one
/// tag, so they share a slot and one script can touch them all.
public enum RedisKeySlot {
    /// Number of slots in a Redis Cluster.
    public static let count = 16384

    /// The slot of `key`.
    public static func slot(for key: some Collection<UInt8>) -> Int {
        let bytes = Array(key)
        var hashed = bytes[...]
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
           let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 {
            hashed = bytes[(open + 1)..<close]
        }
        return Int(crc16(hashed) & 0x3FFF)
    }

    /// The slot of `key`'s UTF-8 bytes.
    public static func slot(for key: String) -> Int {
        slot(for: Array(key.utf8))
    }

    /// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(((crc >> 8) ^ UInt16(byte)) & 0xFF)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}
