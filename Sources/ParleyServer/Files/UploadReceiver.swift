import ParleyCore
import ParleyFiles
import ParleyHTTP
import ParleyIO
import Synchronization

/// One upload request (`POST /{channel}/files`) whose body streams to disk while it arrives.
///
/// Loop-confined. Body bytes (raw, or the file part of a `multipart/form-data` body, parsed
/// here with ``MultipartParser``) are gathered into chunks of ``chunkBytes`` and appended to
/// a temporary file on a ``FileWorkerLane`` (one upload's chunks in order, on the worker
/// threads): the event loop never touches the disk. While more than ``highWater`` chunks wait
/// for the disk the connection is not read (``Event/pauseReading``), so a fast client on a
/// slow disk costs at most that many chunks of memory. When the body is complete, the last
/// job fsyncs the file, decides its type, cleans images (``AttachmentPipeline``), checks the
/// channel's quota and records the upload (``UploadRegistry``); the answer is the attachment.
///
/// Credentials, the client's upload rate and the declared size are checked on the head, before
/// any byte is written. A body cut off halfway (the connection closes) is discarded with its
/// temporary file.
final class UploadReceiver {
    /// What the receiver needs from its connection's session.
    enum Event {
        /// Stop reading: the disk is behind.
        case pauseReading
        /// Read again.
        case resumeReading
        /// The client asked `Expect: 100-continue` and the upload is accepted.
        case sendContinue
        /// The upload is refused (or failed): answer with this, then close (the rest of the
        /// body is not worth reading).
        case refused(HTTPResponse)
    }

    /// Bytes per disk write.
    static let chunkBytes = 64 * 1024
    /// Chunks waiting for the disk above which reading stops...
    static let highWater = 8
    /// ...and below which it starts again.
    static let lowWater = 2

    let channel: String
    private let room: String?
    private let core: ServerCore
    private let files: ServerFiles
    private let loop: EventLoop
    private let limits: ChannelFileLimits
    private let onEvent: (Event) -> Void
    private let lane: FileWorkerLane
    private let slot = UploadSlot()
    private let baseURL: String
    /// The client's address (its upload budgets pay).
    private var ip = ""
    /// The client's name for the file and its claimed type (raw body: query and headers;
    /// multipart: the file part's headers).
    private var name: String?
    private var claimedType: String?
    private var multipart: MultipartParser?
    /// In the file's part (always, for a raw body).
    private var inFile = false
    /// A file part has begun (multipart takes one file per upload).
    private var hasFile = false
    private var pending: [UInt8] = []
    /// File bytes seen so far.
    private var received = 0
    /// Chunks handed to the lane and not written yet.
    private var inFlight = 0
    private var paused = false
    /// Set once refused or failed: later bytes are dropped, the answer is this.
    private var failure: HTTPResponse?
    private var ended = false
    private var outcome: Result<UploadRecord, FileError>?
    private var answer: ((HTTPResponse, Bool) -> Void)?
    private var deadline: LoopTimer?

    /// Whether the upload was accepted on its head (credentials, rate, declared size).
    var isAccepted: Bool { failure == nil }

    /// A receiver for `head` when it is an upload request, else nil. `onEvent` runs on the
    /// loop, possibly before this returns (a refusal on the head).
    static func start(_ head: HTTPRequestHead, core: ServerCore, connection: TCPConnection,
                      onEvent: @escaping (Event) -> Void) -> UploadReceiver? {
        guard let channel = FileRoutes.uploadChannel(head) else { return nil }
        let receiver = UploadReceiver(head, channel: channel, core: core, connection: connection, onEvent: onEvent)
        receiver.begin(head, ip: connection.clientIP)
        return receiver
    }

    private init(_ head: HTTPRequestHead, channel: String, core: ServerCore, connection: TCPConnection,
                 onEvent: @escaping (Event) -> Void) {
        self.channel = channel
        room = head.query("room")
        self.core = core
        files = core.files
        loop = connection.loop
        limits = core.files.limits(of: channel)
        self.onEvent = onEvent
        lane = core.files.pool.makeLane(limit: UploadReceiver.highWater * 2)
        baseURL = core.files.baseURL(for: head, tls: connection.isTLS)
    }

    // MARK: head

    private func begin(_ head: HTTPRequestHead, ip: String) {
        self.ip = ip
        if let refusal = check(head, ip: ip) {
            refuse(refusal)
            return
        }
        let contentType = head.headers["Content-Type"]
        if let boundary = contentType.flatMap(MultipartParser.boundary(fromContentType:)) {
            multipart = MultipartParser(boundary: boundary, limits: MultipartLimits(
                maxTotalBytes: limits.maxBytes + ChannelFileLimits.multipartOverhead))
        } else {
            claimedType = head.headers["Content-Type"]
            name = head.query("name") ?? head.headers["Content-Disposition"].flatMap(ContentDisposition.fileName(fromHeader:))
            inFile = true
            hasFile = true
        }
        let (store, maxBytes, slot) = (files.store, limits.maxBytes, self.slot)
        do throws(FileError) {
            try lane.submit { slot.open { () throws(FileError) in try store.beginUpload(maxBytes: maxBytes) } }
        } catch {
            refuse(FileRoutes.response(error))
            return
        }
        let deadline = LoopTimer(loop: loop)
        self.deadline = deadline
        let timedOut = FileRoutes.text(408, "the upload did not complete within \(files.uploadTimeoutMillis / 1000) s")
        deadline.start(after: files.uploadTimeoutMillis) { [weak self] in self?.fail(timedOut) }
        if head.headers["Expect"]?.lowercased() == "100-continue" { onEvent(.sendContinue) }
    }

    /// The refusal for this head, if any: channel, credentials, room, rate, declared size,
    /// known quota.
    private func check(_ head: HTTPRequestHead, ip: String) -> HTTPResponse? {
        guard RoomKey.isValidName(channel) else { return FileRoutes.text(400, "invalid channel name") }
        if let room, !RoomKey.isValidName(room) { return FileRoutes.text(400, "invalid room name") }
        // A token allows publishing in some rooms: the upload must name one of them.
        if room == nil && head.headers["Authorization"]?.lowercased().hasPrefix("bearer") == true {
            return FileRoutes.text(400, "name the room the file is for with ?room=ROOM (the token must allow publishing there)")
        }
        var params = ["channel": channel]
        if let room { params["room"] = room }
        if let refusal = RESTAuth.check(RESTRequest(head: head, params: params, body: []), core: core) { return refusal }
        let contentType = head.headers["Content-Type"]
        let isMultipart = contentType?.lowercased().hasPrefix("multipart/") == true
        if isMultipart && contentType.flatMap(MultipartParser.boundary(fromContentType:)) == nil {
            return FileRoutes.text(400, "a multipart upload must be multipart/form-data with a valid boundary")
        }
        if let declared = head.headers["Content-Length"].flatMap(Int.init) {
            let allowed = limits.maxBytes + (isMultipart ? ChannelFileLimits.multipartOverhead : 0)
            if declared > allowed { return tooLarge() }
            let fileBytes = isMultipart ? max(0, declared - ChannelFileLimits.multipartOverhead) : declared
            if let used = files.knownUsage(of: channel), used + fileBytes > limits.quotaBytes { return quotaExceeded() }
            if let text = files.bytesRefusal(ip: ip, declared: fileBytes, nowMillis: core.hub.clock.nowMillis()) {
                return FileRoutes.text(429, text)
            }
        }
        // Last: a request refused for what it says costs no allowance.
        if let (text, retryAfter) = files.admitUpload(channel: channel, ip: ip, nowMillis: core.hub.clock.nowMillis()) {
            return FileRoutes.text(429, text, retryAfter: retryAfter)
        }
        return nil
    }

    private func tooLarge() -> HTTPResponse {
        FileRoutes.text(413, "the file is larger than \(limits.maxBytes) bytes (\(ByteCount.humanReadable(limits.maxBytes)))")
    }

    private func quotaExceeded() -> HTTPResponse {
        FileRoutes.text(429, "channel \"\(channel)\" has used its file storage (\(ByteCount.humanReadable(limits.quotaBytes)))")
    }

    // MARK: body

    /// Body bytes as they arrive.
    func receive(_ bytes: [UInt8]) {
        guard failure == nil else { return }
        guard var parser = multipart else {
            file(bytes)
            return
        }
        let events = parser.feed(bytes)
        multipart = parser
        handle(events)
    }

    private func handle(_ events: [MultipartEvent]) {
        for event in events {
            guard failure == nil else { return }
            switch event {
            case .partBegin(let header):
                // Other form fields are skipped (the multipart limits bound them).
                guard header.isFile else { continue }
                guard !hasFile else {
                    fail(FileRoutes.text(400, "send one file per upload"))
                    return
                }
                hasFile = true
                inFile = true
                name = header.filename
                claimedType = header.contentType
            case .body(let bytes):
                if inFile { file(bytes) }
            case .partEnd:
                inFile = false
            case .end:
                break
            case .failed(let error):
                fail(FileRoutes.response(error.fileError))
            }
        }
    }

    private func file(_ bytes: [UInt8]) {
        received += bytes.count
        guard received <= limits.maxBytes else {
            fail(tooLarge())
            return
        }
        pending += bytes
        while pending.count >= UploadReceiver.chunkBytes {
            write(Array(pending.prefix(UploadReceiver.chunkBytes)))
            pending.removeFirst(UploadReceiver.chunkBytes)
        }
    }

    private func write(_ chunk: [UInt8]) {
        let slot = self.slot
        let me = LoopBound(self, on: loop)
        do throws(FileError) {
            try lane.submit {
                slot.append(chunk)
                me.execute { $0.written() }
            }
        } catch {
            fail(FileRoutes.response(error))
            return
        }
        inFlight += 1
        if !paused && inFlight >= UploadReceiver.highWater {
            paused = true
            onEvent(.pauseReading)
        }
    }

    private func written() {
        inFlight -= 1
        if let error = slot.failure, failure == nil {
            fail(FileRoutes.response(error))
            return
        }
        if paused && inFlight <= UploadReceiver.lowWater && failure == nil {
            paused = false
            onEvent(.resumeReading)
        }
    }

    /// The body is complete: the rest goes to disk and the file is stored and recorded.
    func bodyComplete() {
        guard !ended else { return }
        ended = true
        if failure == nil, var parser = multipart {
            handle(parser.finish())
            multipart = parser
        }
        guard failure == nil else { return }
        if !hasFile {
            fail(FileRoutes.text(400, "the form has no file (send a part with a filename)"))
            return
        }
        if received == 0 {
            fail(FileRoutes.text(400, "the file is empty"))
            return
        }
        if !pending.isEmpty {
            write(pending)
            pending = []
        }
        let job = UploadJob(slot: slot, files: files, policy: limits.policy, channel: channel, room: room, name: name,
                            claimedType: claimedType, baseURL: baseURL, quotaBytes: limits.quotaBytes, ip: ip,
                            nowMillis: core.hub.clock.nowMillis())
        let me = LoopBound(self, on: loop)
        do throws(FileError) {
            try lane.submit {
                let result = job.run()
                me.execute { $0.finished(result) }
            }
        } catch {
            fail(FileRoutes.response(error))
        }
    }

    private func finished(_ result: Result<UploadRecord, FileError>) {
        deadline?.stop()
        outcome = result
        deliver()
    }

    /// Calls `completion` (on the loop) with the answer once there is one, and whether the
    /// connection must close after it (a refused upload's body was not read to its end).
    func answer(_ completion: @escaping (HTTPResponse, Bool) -> Void) {
        answer = completion
        deliver()
    }

    private func deliver() {
        guard let answer else { return }
        if let failure {
            self.answer = nil
            answer(failure, true)
            return
        }
        guard let outcome else { return }
        self.answer = nil
        switch outcome {
        case .success(let record):
            var response = HTTPResponse.json(201, record.attachment.jsonValue.serialized())
            response.headers.set("Location", record.url)
            answer(response, false)
        case .failure(let error):
            answer(FileRoutes.response(error), false)
        }
    }

    // MARK: failure

    private func refuse(_ response: HTTPResponse) {
        failure = response
        onEvent(.refused(response))
    }

    /// Stops writing, drops the temporary file, and answers with `response`.
    private func fail(_ response: HTTPResponse) {
        guard failure == nil else { return }
        deadline?.stop()
        discard()
        failure = response
        pending = []
        if paused {
            paused = false
            onEvent(.resumeReading)
        }
        onEvent(.refused(response))
        deliver()
    }

    /// The connection closed: whatever was written goes away.
    func abort() {
        deadline?.stop()
        discard()
    }

    private func discard() {
        slot.cancel()
        let slot = self.slot
        // Queued behind the chunks already in the lane, or straight on the pool when the lane
        // is full; failing both, the file goes when the upload object is released.
        do throws(FileError) {
            try lane.submit { slot.abort() }
        } catch {
            try? files.pool.submit { slot.abort() }
        }
    }
}

/// The upload being written, shared by the jobs of one lane (which run one at a time, in
/// order) and cancelled from the loop.
final class UploadSlot: Sendable {
    private struct State {
        var upload: FileUpload?
        var failure: FileError?
        var cancelled = false
    }
    private let state = Mutex(State())

    /// The first failure of a worker job.
    var failure: FileError? { state.withLock { $0.failure } }

    func open(_ make: () throws(FileError) -> FileUpload) {
        guard !state.withLock({ $0.cancelled }) else { return }
        do throws(FileError) {
            let upload = try make()
            let keep = state.withLock { state -> Bool in
                guard !state.cancelled else { return false }
                state.upload = upload
                return true
            }
            if !keep { upload.abort() }
        } catch {
            state.withLock { $0.failure = $0.failure ?? error }
        }
    }

    func append(_ chunk: [UInt8]) {
        guard let upload = state.withLock({ $0.cancelled || $0.failure != nil ? nil : $0.upload }) else { return }
        do throws(FileError) {
            try upload.append(chunk)
        } catch {
            state.withLock { $0.failure = $0.failure ?? error }
        }
    }

    /// Takes the upload for finishing (nil after a failure or cancel).
    func take() -> Result<FileUpload, FileError> {
        state.withLock { state in
            if let failure = state.failure { return .failure(failure) }
            guard !state.cancelled, let upload = state.upload else {
                return .failure(FileError(.badRequest, "the upload was cancelled"))
            }
            state.upload = nil
            return .success(upload)
        }
    }

    /// No more work: jobs still queued do nothing.
    func cancel() { state.withLock { $0.cancelled = true } }

    /// Removes the temporary file (worker threads only).
    func abort() {
        let upload = state.withLock { state -> FileUpload? in
            defer { state.upload = nil }
            return state.upload
        }
        upload?.abort()
    }
}

/// The last job of an upload, on a worker thread: finish the file, store it (images
/// cleaned), check the quota, record the upload.
private struct UploadJob: Sendable {
    let slot: UploadSlot
    let files: ServerFiles
    let policy: FileTypePolicy
    let channel: String
    let room: String?
    let name: String?
    let claimedType: String?
    let baseURL: String
    let quotaBytes: Int
    /// The uploader's address: its day's byte budget pays for the file.
    let ip: String
    let nowMillis: Int64

    func run() -> Result<UploadRecord, FileError> {
        Result { () throws(FileError) -> UploadRecord in
            let upload = try slot.take().get()
            let pending = try upload.finish()
            // Checked before the work of storing it; a race with other uploads overshoots by
            // at most what is in flight at once.
            if files.currentUsage(of: channel, nowMillis: nowMillis) + pending.size > quotaBytes {
                pending.discard()
                throw FileError(.quota, "channel \"\(channel)\" has used its file storage (\(ByteCount.humanReadable(quotaBytes)))")
            }
            do throws(FileError) {
                try files.chargeUpload(ip: ip, size: pending.size, nowMillis: nowMillis)
            } catch {
                pending.discard()
                throw error
            }
            let pipeline = AttachmentPipeline(store: files.store, policy: policy, images: files.pipeline.images)
            let stored = try pipeline.ingest(pending, claimedType: claimedType) { (header) throws(FileError) in
                try files.chargeImageWork(ip: ip, header: header, nowMillis: nowMillis)
            }
            let record = UploadRecord(id: UploadRegistry.makeID(), channel: channel, room: room,
                                      name: stored.fileName(from: name), file: stored.file, thumbnail: stored.thumbnail,
                                      baseURL: baseURL, uploadedMillis: nowMillis)
            try files.registry.register(record)
            files.added(record.file.metadata.size, to: channel)
            return record
        }
    }
}
