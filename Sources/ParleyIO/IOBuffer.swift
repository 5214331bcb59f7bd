/// An immutable block of bytes that can be written to many connections on many loops.
///
/// Fan-out encodes a message once and hands the same `IOBuffer` to every recipient; each
/// in-flight write retains it until the kernel has taken the bytes.
public final class IOBuffer: @unchecked Sendable {
    // Safe to share across threads: `base` and `count` are set once in `init` and the memory
    // they describe is never written after `init` returns; it is freed only in `deinit`, when
    // no reference (and so no in-flight write, which holds one) is left.
    @usableFromInline let base: UnsafeMutableRawPointer
    /// Number of bytes.
    public let count: Int

    /// A new buffer of `count` bytes, written by `initialize` (every byte of it) before anyone
    /// else can see the buffer.
    public init(count: Int, initializingWith initialize: (UnsafeMutableRawBufferPointer) -> Void) {
        precondition(count >= 0)
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        initialize(UnsafeMutableRawBufferPointer(start: base, count: count))
    }

    /// Copies `bytes` into a new buffer.
    public convenience init(_ bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { buffer in _ = buffer.bindMemory(to: UInt8.self).initialize(from: bytes) }
    }

    /// Copies a string's UTF-8 bytes into a new buffer (straight from the string: the line
    /// door frames every message this way, once per loop).
    public convenience init(string: String) {
        self.init(string.utf8)
    }

    /// The bytes of `buffers` back to back, in one new buffer.
    public convenience init(joining buffers: [IOBuffer]) {
        self.init(count: buffers.reduce(0) { $0 + $1.count }) { joined in
            var offset = 0
            for buffer in buffers {
                UnsafeMutableRawBufferPointer(rebasing: joined[offset..<(offset + buffer.count)])
                    .copyMemory(from: UnsafeRawBufferPointer(start: buffer.base, count: buffer.count))
                offset += buffer.count
            }
        }
    }

    deinit { base.deallocate() }

    /// Reads the bytes without copying.
    @inlinable public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// A copy of the bytes as an array.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}
