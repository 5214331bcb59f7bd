import Foundation
import ParleyCore
import ParleyHTTP
import ParleyIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What to upload: bytes in memory, or a file on disk (read a chunk at a time).
public enum UploadSource: Sendable {
    case data(Data)
    case file(URL)
}

/// How far an upload is.
public struct UploadProgress: Sendable, Hashable {
    /// Bytes the server has been sent (and the network has taken).
    public let sentBytes: Int
    /// Bytes in all.
    public let totalBytes: Int

    public init(sentBytes: Int, totalBytes: Int) {
        self.sentBytes = sentBytes
        self.totalBytes = totalBytes
    }

    /// 0...1.
    public var fraction: Double { totalBytes == 0 ? 1 : Double(sentBytes) / Double(totalBytes) }
}

/// Uploads files to a Parley server (`POST /{channel}/files`), streaming them over Parley's
/// own HTTP/1.1 client on ParleyIO: a file is read and sent a chunk at a time, the next chunk
/// only once the connection has taken the last, so memory stays flat and progress is real.
///
/// The answer is the ``Attachment`` a message carries; publish it with
/// ``Room/publish(attachments:caption:)`` (or let ``Room/publish(file:name:mime:caption:progress:)``
/// do both).
public struct FileUploader: Sendable {
    /// Largest answer read from the server.
    static let maxResponseBytes = 1 << 20
    /// Bytes per read of a file and per write.
    static let chunkBytes = 64 * 1024
    /// Bytes that may wait in the connection before the next chunk is read.
    static let lowWater = 256 * 1024

    private let group: EventLoopGroup?
    /// For `https://` servers: a PEM file of certificates to trust instead of the system's.
    public var trustedCertificatesFile: String?
    /// How long the whole upload may take.
    public var timeout: Duration = .seconds(300)

    /// Uses a loop of its own, shared by every uploader in the process.
    public init() { group = nil }

    /// Uses a loop of `group` for each upload.
    public init(group: EventLoopGroup) { self.group = group }

    private static let sharedGroup = EventLoopGroup(loopCount: 1)

    /// Uploads `source` to `channel` on the server whose native door is `serverURL`
    /// (`ws://HOST:PORT/v3/websocket`: the same host and port serve HTTP). `room` names the
    /// room the file is for (required with a `token`, which must allow publishing there).
    /// `progress` is called as bytes go out.
    public func upload(_ source: UploadSource, name: String, mime: String?, channel: String, room: String?,
                       serverURL: URL, token: String? = nil,
                       progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }) async throws(ParleyClientError) -> Attachment {
        let endpoint = try ParleyEndpoint(url: serverURL)
        let reader = try SourceReader(source)
        var query = "name=" + Self.queryEscaped(name)
        if let room { query += "&room=" + Self.queryEscaped(room) }
        var head = "POST /\(Self.pathEscaped(channel))/files?\(query) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\n"
        head += "Content-Type: \(Self.headerSafe(mime ?? "application/octet-stream"))\r\nContent-Length: \(reader.size)\r\n"
        if let token { head += "Authorization: Bearer \(Self.headerSafe(token))\r\n" }
        head += "Connection: close\r\n\r\n"
        let tls: TLSContext?
        do {
            tls = endpoint.isSecure ? try TLSContext(clientTrusting: trustedCertificatesFile) : nil
        } catch {
            throw ParleyClientError(.connectionFailed, error.message)
        }
        let address = try await Self.resolve(endpoint.host)
        let loop = (group ?? Self.sharedGroup).next()
        let connection = try await UploadConnection.open(loop: loop, host: address, port: endpoint.port, tls: tls,
                                                         serverName: endpoint.host)
        let total = reader.size
        let deadline = ContinuousClock.now + timeout
        let outcome: Result<[UInt8], ParleyClientError> = await withTaskCancellationHandler {
            do throws(ParleyClientError) {
                var open = await connection.send(Array(head.utf8))
                var sent = 0
                progress(UploadProgress(sentBytes: 0, totalBytes: total))
                // An early answer (refused: too large, wrong type, no permission) or a closed
                // connection stops the sending; the answer says why.
                while open, sent < total, !connection.hasResponse {
                    if Task.isCancelled { throw ParleyClientError(.connectionLost, "the upload was cancelled") }
                    if ContinuousClock.now > deadline { throw ParleyClientError(.timeout, "the upload took too long") }
                    let chunk = try reader.read(offset: sent, count: Self.chunkBytes)
                    guard !chunk.isEmpty else { throw ParleyClientError(.unsupported, "the file got shorter while it was sent") }
                    open = await connection.send(chunk)
                    sent += chunk.count
                    progress(UploadProgress(sentBytes: sent, totalBytes: total))
                }
                return .success(try await connection.response(limit: Self.maxResponseBytes, deadline: deadline))
            } catch {
                connection.close()
                return .failure(error)
            }
        } onCancel: {
            connection.close()
        }
        let response = try outcome.get()
        guard !response.isEmpty else {
            throw ParleyClientError(.connectionLost, "the server closed the connection without answering the upload")
        }
        return try Self.attachment(from: response)
    }

    /// The attachment in a 201 answer, or the server's error.
    static func attachment(from response: [UInt8]) throws(ParleyClientError) -> Attachment {
        guard let split = find([13, 10, 13, 10], in: response) else {
            throw ParleyClientError(.protocolViolation, "the server's answer to the upload is incomplete")
        }
        let head = String(decoding: response[..<split], as: UTF8.self)
        let statusParts = head.prefix { $0 != "\r" }.split(separator: " ")
        let status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
        var body = Array(response[(split + 4)...])
        for line in head.split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length",
               let length = Int(parts[1].trimmingCharacters(in: .whitespaces)), length <= body.count {
                body = Array(body.prefix(length))
            }
        }
        guard (200..<300).contains(status) else {
            let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw ParleyClientError(.server, "upload refused (\(status)): \(text.isEmpty ? httpReasonPhrase(status) : text)")
        }
        do {
            return try Attachment(json: try JSONParser.parse(body))
        } catch {
            throw ParleyClientError(.protocolViolation, "the server answered the upload with something that is not an attachment")
        }
    }

    /// Whether `response` holds a whole answer (head, and as many body bytes as it declares).
    static func isComplete(_ response: [UInt8]) -> Bool {
        guard let split = find([13, 10, 13, 10], in: response) else { return false }
        let head = String(decoding: response[..<split], as: UTF8.self).lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
              let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) else { return false }
        return response.count - split - 4 >= length
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] && Array(haystack[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }

    static func queryEscaped(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn:
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
    }

    static func pathEscaped(_ text: String) -> String { queryEscaped(text) }

    /// No CR, LF or NUL in a header we write.
    static func headerSafe(_ text: String) -> String {
        String(text.unicodeScalars.filter { $0 != "\r" && $0 != "\n" && $0 != "\0" }.map(Character.init))
    }

    /// A numeric address for `host` (the loop connects to numeric addresses only).
    static func resolve(_ host: String) async throws(ParleyClientError) -> String {
        switch await HostResolver.resolve(host) {
        case .success(let address): return address
        case .failure(let error): throw ParleyClientError(.connectionFailed, error.message)
        }
    }
}

/// Reads the upload's bytes a chunk at a time (a file is never read whole).
private struct SourceReader: Sendable {
    let size: Int
    private let data: Data?
    private let handle: FileHandle?

    init(_ source: UploadSource) throws(ParleyClientError) {
        switch source {
        case .data(let bytes):
            data = bytes
            handle = nil
            size = bytes.count
        case .file(let url):
            guard let opened = try? FileHandle(forReadingFrom: url),
                  let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
                  let length = (attributes[.size] as? NSNumber)?.intValue else {
                throw ParleyClientError(.unsupported, "cannot read \(url.path)")
            }
            data = nil
            handle = opened
            size = length
        }
    }

    func read(offset: Int, count: Int) throws(ParleyClientError) -> [UInt8] {
        if let data {
            let start = data.startIndex + offset
            return Array(data[start..<min(data.endIndex, start + count)])
        }
        guard let handle else { return [] }
        do {
            try handle.seek(toOffset: UInt64(offset))
            return Array(try handle.read(upToCount: count) ?? Data())
        } catch {
            throw ParleyClientError(.unsupported, "cannot read the file: \(error.localizedDescription)")
        }
    }
}

/// One upload's TCP connection, confined to its loop; every call hops there.
///
/// `@unchecked Sendable` proof: `handler` (loop-confined) is only touched inside
/// `loop.execute { ... }` closures, i.e. on the loop's thread; `state` is a Mutex.
private final class UploadConnection: @unchecked Sendable {
    private let loop: EventLoop
    private let handler: UploadHandler
    private let responseStarted = Mutex(false)

    private init(loop: EventLoop, handler: UploadHandler) {
        self.loop = loop
        self.handler = handler
    }

    static func open(loop: EventLoop, host: String, port: Int, tls: TLSContext?,
                     serverName: String) async throws(ParleyClientError) -> UploadConnection {
        let result: Result<UploadConnection, ParleyClientError> = await withCheckedContinuation { continuation in
            loop.execute {
                loop.connect(host: host, port: port) { result in
                    switch result {
                    case .failure(let error):
                        continuation.resume(returning: .failure(ParleyClientError(.connectionFailed, "cannot connect to \(host):\(port): \(error.message)")))
                    case .success(let tcp):
                        let handler = UploadHandler(connection: tcp)
                        tcp.handler = handler
                        if let tls {
                            do throws(IOError) {
                                try tcp.startTLS(tls, serverName: serverName)
                            } catch {
                                tcp.close(flush: false)
                                continuation.resume(returning: .failure(ParleyClientError(.connectionFailed, error.message)))
                                return
                            }
                        }
                        let opened = UploadConnection(loop: loop, handler: handler)
                        handler.onFirstByte = { opened.responseStarted.withLock { $0 = true } }
                        continuation.resume(returning: .success(opened))
                    }
                }
            }
        }
        return try result.get()
    }

    /// Whether the server has begun answering (before the body was all sent: a refusal).
    var hasResponse: Bool { responseStarted.withLock { $0 } }

    /// Writes `bytes` and returns once the connection holds little enough to take more;
    /// false when the connection is closed.
    func send(_ bytes: [UInt8]) async -> Bool {
        await withCheckedContinuation { continuation in
            loop.execute {
                guard self.handler.connection.state == .open else { return continuation.resume(returning: false) }
                self.handler.connection.write(bytes)
                self.handler.whenDrained { continuation.resume(returning: $0) }
            }
        }
    }

    /// Everything the server sent, once it has closed the connection (the request said
    /// `Connection: close`).
    func response(limit: Int, deadline: ContinuousClock.Instant) async throws(ParleyClientError) -> [UInt8] {
        let millis = max(1, (deadline - ContinuousClock.now).components.seconds * 1000)
        let result: Result<[UInt8], ParleyClientError> = await withCheckedContinuation { continuation in
            loop.execute {
                self.handler.whenClosed(limit: limit, timeoutMillis: UInt64(millis)) { continuation.resume(returning: $0) }
            }
        }
        return try result.get()
    }

    func close() {
        loop.execute { self.handler.connection.close(flush: false) }
    }
}

/// The loop side of an upload connection.
private final class UploadHandler: ConnectionHandler {
    let connection: TCPConnection
    var onFirstByte: (() -> Void)?
    private var received: [UInt8] = []
    private var tooLong = false
    private var closedWaiter: ((Result<[UInt8], ParleyClientError>) -> Void)?
    private var drainWaiter: ((Bool) -> Void)?
    private var limit = FileUploader.maxResponseBytes
    private var timer: LoopTimer?

    init(connection: TCPConnection) { self.connection = connection }

    func whenDrained(_ body: @escaping (Bool) -> Void) {
        drainWaiter = body
        connection.whenDrained(below: FileUploader.lowWater) { [weak self] in
            guard let self, let waiter = self.drainWaiter else { return }
            self.drainWaiter = nil
            waiter(true)
        }
    }

    func whenClosed(limit: Int, timeoutMillis: UInt64, _ body: @escaping (Result<[UInt8], ParleyClientError>) -> Void) {
        self.limit = limit
        guard connection.state != .closed, !FileUploader.isComplete(received) else {
            connection.close(flush: false)
            return body(.success(received))
        }
        closedWaiter = body
        let timer = LoopTimer(loop: connection.loop)
        self.timer = timer
        timer.start(after: timeoutMillis) { [weak self] in
            guard let self, let waiter = self.closedWaiter else { return }
            self.closedWaiter = nil
            self.connection.close(flush: false)
            waiter(.failure(ParleyClientError(.timeout, "no answer to the upload in time")))
        }
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        if received.isEmpty, let first = onFirstByte {
            onFirstByte = nil
            first()
        }
        guard received.count + bytes.count <= limit else {
            tooLong = true
            connection.close(flush: false)
            return
        }
        received.append(contentsOf: bytes)
        // The whole answer is in: no need to wait for the server to close.
        if closedWaiter != nil, FileUploader.isComplete(received) { connection.close(flush: false) }
    }

    func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
        timer?.stop()
        timer = nil
        if let waiter = drainWaiter {
            drainWaiter = nil
            waiter(false)
        }
        if let waiter = closedWaiter {
            closedWaiter = nil
            waiter(tooLong ? .failure(ParleyClientError(.protocolViolation, "the server's answer is too long")) : .success(received))
        }
    }
}
