import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns a host name into a numeric address for `EventLoop.connect`, which takes numeric
/// addresses only. Numeric hosts and `localhost` pass through; names are looked up with
/// `getaddrinfo` on a background queue (it blocks), never on an event loop.
/// One resolver for every client in the project (Redis, the SDK's WebSocket transport, its
/// uploader).
public enum HostResolver {
    public static func isNumeric(_ host: String) -> Bool {
        host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
    }

    /// Calls `completion` (on the resolving thread, or at once for numeric hosts) with an
    /// IPv4 address when there is one, else IPv6.
    public static func resolve(_ host: String, completion: @escaping @Sendable (Result<String, IOError>) -> Void) {
        if host == "localhost" {
            completion(.success("127.0.0.1"))
            return
        }
        if isNumeric(host) {
            completion(.success(host))
            return
        }
        DispatchQueue.global().async {
            completion(lookup(host))
        }
    }

    /// The same, awaited.
    public static func resolve(_ host: String) async -> Result<String, IOError> {
        await withCheckedContinuation { continuation in
            resolve(host) { continuation.resume(returning: $0) }
        }
    }

    private static func lookup(_ host: String) -> Result<String, IOError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let list else {
            let reason = String(cString: gai_strerror(status))
            return .failure(IOError(message: "cannot resolve host \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        var fallback: String?
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            var name = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            if current.pointee.ai_family == AF_INET {
                var address = current.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                if inet_ntop(AF_INET, &address, &name, socklen_t(name.count)) != nil {
                    return .success(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
                }
            } else if current.pointee.ai_family == AF_INET6, fallback == nil {
                var address = current.pointee.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                if inet_ntop(AF_INET6, &address, &name, socklen_t(name.count)) != nil {
                    fallback = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                }
            }
            entry = current.pointee.ai_next
        }
        if let fallback { return .success(fallback) }
        return .failure(IOError(message: "cannot resolve host \(host): no address"))
    }
}
