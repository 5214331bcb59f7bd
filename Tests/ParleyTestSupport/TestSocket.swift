import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A plain blocking TCP client for tests, with a timeout on every wait.
public final class TestSocket: @unchecked Sendable {
    // Safe: tests use one TestSocket from one task at a time; it is Sendable only so it can be
    // handed to a detached task that owns it from then on.
    public let fd: Int32
    private var buffer: [UInt8] = []

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Connects to 127.0.0.1:`port` (or another numeric IPv4 host).
    /// `receiveBuffer` (bytes) is set before connecting, so the window stays small: a slow reader.
    public init(port: Int, host: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket() failed") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw Failure("connect to \(host):\(port) failed: errno \(errno)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    /// Writes all bytes.
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw Failure("send failed: errno \(errno)") }
            offset += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Closes abruptly: RST instead of FIN.
    public func abort() {
        var lingerValue = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerValue, socklen_t(MemoryLayout<linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Half-closes the write side.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads whatever arrives within `timeout` seconds into the buffer; returns false on EOF.
    @discardableResult
    public func fill(timeout: Double) throws -> Bool {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(timeout * 1000))
        if ready <= 0 { return true }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { throw Failure("recv failed: errno \(errno)") }
        if n == 0 { return false }
        buffer.append(contentsOf: chunk[0..<n])
        return true
    }

    /// The next `\n`-terminated line (without the newline), waiting at most `timeout` seconds.
    public func readLine(timeout: Double = 5) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let index = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<index])
                buffer.removeSubrange(...index)
                return String(decoding: line, as: UTF8.self)
            }
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { throw Failure("timed out waiting for a line; have \(String(decoding: buffer, as: UTF8.self).debugDescription)") }
            if try !fill(timeout: min(left, 0.5)) {
                throw Failure("connection closed while waiting for a line; have \(String(decoding: buffer, as: UTF8.self).debugDescription)")
            }
        }
    }

    /// Reads lines until one satisfies `predicate`; returns it.
    public func readLine(timeout: Double = 5, until predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let line = try readLine(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(line) { return line }
        }
    }

    /// Waits until the peer closes; returns false on timeout.
    public func waitForClose(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            guard let open = try? fill(timeout: min(0.5, deadline.timeIntervalSinceNow)) else { return true }
            if !open { return true }
            buffer.removeAll()
        }
        return false
    }

    /// Bytes received but not consumed yet.
    public var buffered: [UInt8] { buffer }
    public func clearBuffer() { buffer.removeAll() }
    /// Drops the first `count` buffered bytes (consumed by the caller).
    public func consume(_ count: Int) { buffer.removeFirst(count) }
}
