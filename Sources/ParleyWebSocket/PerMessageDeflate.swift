import CZlib

/// The negotiated permessage-deflate parameters (RFC 7692 §7.1).
///
/// "server_*" parameters constrain the server's compressor, "client_*" the client's.
public struct PerMessageDeflateParameters: Sendable, Equatable {
    /// The server resets its compression context after every message.
    public var serverNoContextTakeover: Bool
    /// The client resets its compression context after every message.
    public var clientNoContextTakeover: Bool
    /// LZ77 window of the server's compressor, 8...15.
    public var serverMaxWindowBits: Int
    /// LZ77 window of the client's compressor, 8...15.
    public var clientMaxWindowBits: Int

    /// Creates parameters; the defaults are the RFC defaults (context takeover, 15 bits).
    public init(serverNoContextTakeover: Bool = false, clientNoContextTakeover: Bool = false,
                serverMaxWindowBits: Int = 15, clientMaxWindowBits: Int = 15) {
        self.serverNoContextTakeover = serverNoContextTakeover
        self.clientNoContextTakeover = clientNoContextTakeover
        self.serverMaxWindowBits = serverMaxWindowBits
        self.clientMaxWindowBits = clientMaxWindowBits
    }

    /// Whether the side playing `role` resets its compressor after each message.
    func noContextTakeover(sender role: WebSocketRole) -> Bool {
        role == .server ? serverNoContextTakeover : clientNoContextTakeover
    }

    /// The window the side playing `role` compresses with.
    func maxWindowBits(sender role: WebSocketRole) -> Int {
        role == .server ? serverMaxWindowBits : clientMaxWindowBits
    }
}

/// Parsing and negotiation of the `Sec-WebSocket-Extensions` header for permessage-deflate.
public enum PerMessageDeflateNegotiation {
    /// One extension offer or response: a name and its parameters in order.
    struct Extension: Equatable {
        var name: String
        var parameters: [(name: String, value: String?)]

        static func == (a: Extension, b: Extension) -> Bool {
            a.name == b.name && a.parameters.count == b.parameters.count
                && zip(a.parameters, b.parameters).allSatisfy { $0.name == $1.name && $0.value == $1.value }
        }
    }

    /// Parses an extension list (RFC 6455 §9.1): `ext ; p ; p=v ; p="v" , ext2 ...`.
    /// Names are lowercased. Returns nil on a syntax error.
    static func parseExtensions(_ header: String) -> [Extension]? {
        var scanner = Scanner(Array(header.utf8))
        var result: [Extension] = []
        while true {
            scanner.skipSpace()
            if scanner.atEnd { break }
            if scanner.peek == UInt8(ascii: ",") { scanner.advance(); continue }  // empty list element
            guard let name = scanner.token() else { return nil }
            var ext = Extension(name: name.lowercased(), parameters: [])
            scanner.skipSpace()
            while scanner.peek == UInt8(ascii: ";") {
                scanner.advance()
                scanner.skipSpace()
                guard let pname = scanner.token() else { return nil }
                scanner.skipSpace()
                var value: String?
                if scanner.peek == UInt8(ascii: "=") {
                    scanner.advance()
                    scanner.skipSpace()
                    if scanner.peek == UInt8(ascii: "\"") {
                        guard let quoted = scanner.quotedString() else { return nil }
                        // RFC 6455 §9.1: a quoted value must itself be a token after unquoting.
                        guard !quoted.isEmpty, quoted.utf8.allSatisfy(Scanner.isTokenChar) else { return nil }
                        value = quoted
                    } else {
                        guard let v = scanner.token() else { return nil }
                        value = v
                    }
                    scanner.skipSpace()
                }
                ext.parameters.append((pname.lowercased(), value))
            }
            result.append(ext)
            scanner.skipSpace()
            if scanner.atEnd { break }
            guard scanner.peek == UInt8(ascii: ",") else { return nil }
            scanner.advance()
        }
        return result
    }

    /// Window bits value: 8...15, decimal, no leading zeros (RFC 7692 §7.1.2).
    private static func windowBits(_ value: String) -> Int? {
        guard (1...2).contains(value.utf8.count), value.first != "0", let n = Int(value), (8...15).contains(n) else {
            return nil
        }
        return n
    }

    /// Server side: looks at the client's offers in order and accepts the first valid
    /// permessage-deflate offer. Offers with unknown, duplicate or malformed parameters are
    /// declined (RFC 7692 §5). Returns the `Sec-WebSocket-Extensions` response value and the
    /// resulting parameters, or nil to decline compression.
    public static func negotiateServer(offerHeader: String?) -> (responseHeaderValue: String, parameters: PerMessageDeflateParameters)? {
        guard let offerHeader, let offers = parseExtensions(offerHeader) else { return nil }
        offerLoop: for offer in offers where offer.name == "permessage-deflate" {
            var params = PerMessageDeflateParameters()
            var seen = Set<String>()
            var response = ["permessage-deflate"]
            for (name, value) in offer.parameters {
                guard seen.insert(name).inserted else { continue offerLoop }
                switch name {
                case "server_no_context_takeover":
                    guard value == nil else { continue offerLoop }
                    params.serverNoContextTakeover = true
                    response.append(name)
                case "client_no_context_takeover":
                    guard value == nil else { continue offerLoop }
                    params.clientNoContextTakeover = true
                    response.append(name)
                case "server_max_window_bits":
                    guard let value, let bits = windowBits(value) else { continue offerLoop }
                    params.serverMaxWindowBits = bits
                    response.append("server_max_window_bits=\(bits)")
                case "client_max_window_bits":
                    if let value {
                        guard let bits = windowBits(value) else { continue offerLoop }
                        params.clientMaxWindowBits = bits
                        response.append("client_max_window_bits=\(bits)")
                    }
                    // Without a value the client merely says it supports the parameter; we
                    // don't restrict its window (we always inflate with 15 bits).
                default:
                    continue offerLoop
                }
            }
            return (response.joined(separator: "; "), params)
        }
        return nil
    }

    /// The client's offer: deflate with context takeover, announcing that the server may
    /// limit our window.
    public static func clientOffer() -> String {
        "permessage-deflate; client_max_window_bits"
    }

    /// Client side: validates the server's `Sec-WebSocket-Extensions` response to
    /// ``clientOffer()``. nil/empty means no compression; anything not a valid
    /// permessage-deflate response to our offer throws (the client must fail the connection).
    public static func acceptClient(responseHeader: String?) throws(WebSocketHandshakeError) -> PerMessageDeflateParameters? {
        guard let responseHeader, !responseHeader.allSatisfy({ $0 == " " || $0 == "\t" }) else { return nil }
        guard let exts = parseExtensions(responseHeader), !exts.isEmpty else {
            throw WebSocketHandshakeError(status: 0, message: "malformed Sec-WebSocket-Extensions")
        }
        guard exts.count == 1, exts[0].name == "permessage-deflate" else {
            throw WebSocketHandshakeError(status: 0, message: "server accepted an extension we did not offer")
        }
        var params = PerMessageDeflateParameters()
        var seen = Set<String>()
        for (name, value) in exts[0].parameters {
            guard seen.insert(name).inserted else {
                throw WebSocketHandshakeError(status: 0, message: "duplicate extension parameter \(name)")
            }
            switch (name, value) {
            case ("server_no_context_takeover", nil): params.serverNoContextTakeover = true
            case ("client_no_context_takeover", nil): params.clientNoContextTakeover = true
            case ("server_max_window_bits", let v?) where windowBits(v) != nil:
                params.serverMaxWindowBits = windowBits(v)!
            case ("client_max_window_bits", let v?) where windowBits(v) != nil:
                params.clientMaxWindowBits = windowBits(v)!
            default:
                throw WebSocketHandshakeError(status: 0, message: "bad extension parameter \(name)")
            }
        }
        return params
    }
}

/// A tiny byte scanner for RFC 7230 tokens and quoted strings.
private struct Scanner {
    let bytes: [UInt8]
    var index = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var atEnd: Bool { index >= bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[index] }
    mutating func advance() { index += 1 }
    mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x09 { index += 1 }
    }
    static func isTokenChar(_ b: UInt8) -> Bool { isHTTPTokenByte(b) }
    mutating func token() -> String? {
        let start = index
        while let b = peek, Scanner.isTokenChar(b) { index += 1 }
        guard index > start else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
    mutating func quotedString() -> String? {
        guard peek == UInt8(ascii: "\"") else { return nil }
        index += 1
        var out: [UInt8] = []
        while let b = peek {
            index += 1
            switch b {
            case UInt8(ascii: "\""): return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = peek else { return nil }
                index += 1
                out.append(escaped)
            default: out.append(b)
            }
        }
        return nil
    }
}

/// The sending half of permessage-deflate for one connection: raw deflate with the trailing
/// `00 00 ff ff` of a sync flush stripped (RFC 7692 §7.2.1). Non-Sendable: owned by one
/// connection's machine.
final class PerMessageDeflateCompressor {
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool
    /// zlib's raw deflate refuses an 8-bit window; see `init?`.
    let windowBits: Int

    /// Returns nil when zlib can't produce a stream within `windowBits` (8 bits: zlib raw
    /// deflate only supports 9...15, and a 9-bit window could emit distances the peer's
    /// 256-byte window rejects). The caller then sends every message uncompressed, which
    /// RFC 7692 allows.
    init?(windowBits: Int, noContextTakeover: Bool, level: Int32 = 6, memLevel: Int32 = 8) {
        guard (9...15).contains(windowBits) else { return nil }
        self.windowBits = windowBits
        self.noContextTakeover = noContextTakeover
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        guard parley_deflateInit2(stream, level, -Int32(windowBits), memLevel) == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Compresses one whole message.
    func compress(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        var output: [UInt8] = []
        // deflateBound is for Z_FINISH; a sync flush adds a few bytes; grow if needed.
        var capacity = Int(deflateBound(stream, uLong(input.count))) + 16
        var produced = 0
        let inBase = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self)) }
        stream.pointee.next_in = inBase
        stream.pointee.avail_in = uInt(input.count)
        while true {
            output.reserveCapacity(capacity)
            output.append(contentsOf: repeatElement(0, count: capacity - output.count))
            let status: Int32 = output.withUnsafeMutableBufferPointer { out in
                stream.pointee.next_out = out.baseAddress! + produced
                stream.pointee.avail_out = uInt(capacity - produced)
                let status = deflate(stream, Z_SYNC_FLUSH)
                produced = capacity - Int(stream.pointee.avail_out)
                return status
            }
            precondition(status == Z_OK || status == Z_BUF_ERROR, "deflate failed: \(status)")
            // Done once zlib had room to spare: the flush is complete.
            if stream.pointee.avail_out > 0 && stream.pointee.avail_in == 0 { break }
            capacity *= 2
        }
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
        output.removeSubrange(produced...)
        if output.count >= 4 && output[(output.count - 4)...].elementsEqual([0x00, 0x00, 0xFF, 0xFF]) {
            output.removeLast(4)
        }
        if noContextTakeover { deflateReset(stream) }
        return output
    }

    func compress(_ input: [UInt8]) -> [UInt8] {
        input.withUnsafeBytes { compress($0) }
    }
}

/// The receiving half of permessage-deflate: inflates frame payloads as they arrive, with a
/// hard cap on the output so a small bomb can't allocate beyond `limit`. Always inflates with
/// a 15-bit window, which accepts any window the peer may use.
final class PerMessageDeflateDecompressor {
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool
    private var streamEnded = false
    private static let chunkSize = 16 * 1024
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    /// `windowBits` other than 15 only serves tests that check our compressor stays inside
    /// the window it negotiated.
    init(noContextTakeover: Bool, windowBits: Int = 15) {
        self.noContextTakeover = noContextTakeover
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let status = parley_inflateInit2(stream, -Int32(windowBits))
        precondition(status == Z_OK, "inflateInit2 failed: \(status)")
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Inflates one frame's payload of the current message, appending to `output`. Throws
    /// 1009 if `output` would exceed `limit`, 1007 on corrupt data.
    func inflateFragment(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(WebSocketProtocolError) {
        try inflate(input, into: &output, limit: limit)
    }

    /// Inflates one frame's payload; see ``inflateFragment(_:into:limit:)-(UnsafeRawBufferPointer,_,_)``.
    func inflateFragment(_ input: [UInt8], into output: inout [UInt8], limit: Int) throws(WebSocketProtocolError) {
        // Array.withUnsafeBytes is untyped `rethrows`; carry the typed error out as a Result.
        let result = input.withUnsafeBytes { raw in
            Result { () throws(WebSocketProtocolError) in try inflate(raw, into: &output, limit: limit) }
        }
        try result.get()
    }

    /// Ends the current message: feeds the stripped `00 00 ff ff` trailer and resets the
    /// context if the peer doesn't keep it.
    func finishMessage(into output: inout [UInt8], limit: Int) throws(WebSocketProtocolError) {
        try inflateFragment(Self.tail, into: &output, limit: limit)
        if noContextTakeover || streamEnded {
            inflateReset(stream)
            streamEnded = false
        }
    }

    /// Drops any partial message state (after an error, the connection is closing anyway).
    func reset() {
        inflateReset(stream)
        streamEnded = false
    }

    private func inflate(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(WebSocketProtocolError) {
        guard input.count > 0 else { return }
        // After a final deflate block (BFINAL) the peer may only send the sync trailer.
        if streamEnded { return }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
        while true {
            var produced = 0
            let status: Int32 = chunk.withUnsafeMutableBufferPointer { out in
                stream.pointee.next_out = out.baseAddress
                stream.pointee.avail_out = uInt(out.count)
                let status = CZlib.inflate(stream, Z_SYNC_FLUSH)
                produced = out.count - Int(stream.pointee.avail_out)
                return status
            }
            if produced > 0 {
                guard output.count + produced <= limit else {
                    throw WebSocketProtocolError(.messageTooBig, "message too big after inflate")
                }
                output.append(contentsOf: chunk[0..<produced])
            }
            switch status {
            case Z_OK:
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 { return }
            case Z_STREAM_END:
                streamEnded = true
                return
            case Z_BUF_ERROR:
                // No progress possible: all input consumed (or the output chunk was full, retried above).
                if stream.pointee.avail_in == 0 { return }
                if produced == 0 { throw WebSocketProtocolError(.invalidPayload, "inflate stalled") }
            default:
                throw WebSocketProtocolError(.invalidPayload, "invalid compressed data")
            }
        }
    }
}

extension PerMessageDeflateParameters {
    /// The zlib library's version (`zlibVersion()`), for `parley --version`.
    public static var zlibVersion: String { String(cString: CZlib.zlibVersion()) }
}
