import CLibUV

/// Helpers for IPv4/IPv6 socket addresses.
enum SocketAddress {
    /// Parses a numeric IPv4 or IPv6 address (or `localhost`) into a sockaddr_storage.
    static func make(host: String, port: Int) throws(IOError) -> sockaddr_storage {
        var storage = sockaddr_storage()
        let name = host == "localhost" ? "127.0.0.1" : host
        let ok4 = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(name, Int32(port), $0) }
        }
        if ok4 == 0 { return storage }
        let trimmed = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
        let ok6 = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(trimmed, Int32(port), $0) }
        }
        if ok6 == 0 { return storage }
        throw IOError(message: "not a numeric IPv4 or IPv6 address: \(host)")
    }

    static func length(of storage: sockaddr_storage) -> socklen_t {
        storage.ss_family == sa_family_t(AF_INET6)
            ? socklen_t(MemoryLayout<sockaddr_in6>.size) : socklen_t(MemoryLayout<sockaddr_in>.size)
    }

    private static func cString(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Numeric host and port of an address.
    static func describe(_ storage: sockaddr_storage) -> (String, Int) {
        var copy = storage
        var name = [CChar](repeating: 0, count: 64)
        return withUnsafePointer(to: &copy) { pointer -> (String, Int) in
            if storage.ss_family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    uv_ip6_name(sin6, &name, name.count)
                    return (cString(name), Int(UInt16(bigEndian: sin6.pointee.sin6_port)))
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                uv_ip4_name(sin, &name, name.count)
                return (cString(name), Int(UInt16(bigEndian: sin.pointee.sin_port)))
            }
        }
    }
}
