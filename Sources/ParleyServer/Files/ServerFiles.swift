import Foundation
import ParleyCore
import ParleyFiles
import ParleyHTTP
import Synchronization

/// The attachment limits that apply in one channel (the server-wide values unless the
/// channel's `limits` say otherwise).
struct ChannelFileLimits: Sendable {
    /// Largest file, in bytes.
    let maxBytes: Int
    /// Which types are accepted.
    let policy: FileTypePolicy
    /// Uploads per minute per client address in this channel: the channel's own limit, or
    /// nil when only the server-wide one (across channels) applies.
    let channelUploadsPerMinute: Int?
    /// The tighter of the two, for messages.
    let uploadsPerMinute: Int
    /// Bytes of uploads the channel may hold.
    let quotaBytes: Int

    /// A multipart body may be this much larger than its file (boundaries, part headers,
    /// small form fields).
    static let multipartOverhead = 64 * 1024

    init(_ configuration: ServerConfiguration, _ channel: ChannelSettings?) {
        maxBytes = channel?.uploadMaxBytes ?? configuration.uploadMaxBytes
        let types = channel?.uploadTypes ?? configuration.uploadTypes
        policy = types.map { FileTypePolicy(allowedTypes: Set($0)) } ?? FileTypePolicy()
        channelUploadsPerMinute = channel?.uploadsPerMinute
        uploadsPerMinute = min(channel?.uploadsPerMinute ?? configuration.uploadsPerMinute, configuration.uploadsPerMinute)
        quotaBytes = channel?.filesQuotaBytes ?? configuration.filesQuotaBytes
    }
}

/// The file settings a reload may change, read together.
struct FileSettings: Sendable {
    let defaults: ChannelFileLimits
    let channels: [String: ChannelFileLimits]
    let publicURL: String?
    let uploadTimeoutMillis: UInt64
    let maxRequestBytes: Int
    let uploadsPerMinute: (perClient: Int, total: Int)
    /// Bytes per day per client address and for the whole server.
    let bytesPerDay: (perClient: Int, total: Int)
    /// Declared image pixels per minute per client address and for the whole server.
    let pixelsPerMinute: (perClient: Int, total: Int)

    init(_ configuration: ServerConfiguration) {
        defaults = ChannelFileLimits(configuration, nil)
        var channels: [String: ChannelFileLimits] = [:]
        for channel in configuration.channels { channels[channel.id] = ChannelFileLimits(configuration, channel) }
        self.channels = channels
        publicURL = configuration.publicURL
        uploadTimeoutMillis = configuration.uploadTimeoutMillis
        let largest = ([defaults] + channels.values).map(\.maxBytes).max() ?? defaults.maxBytes
        maxRequestBytes = largest + ChannelFileLimits.multipartOverhead
        uploadsPerMinute = (configuration.uploadsPerMinute, configuration.uploadsPerMinuteTotal)
        bytesPerDay = (configuration.uploadBytesPerIPPerDay, configuration.uploadBytesTotalPerDay)
        pixelsPerMinute = (configuration.imagePixelsPerIPPerMinute, configuration.imagePixelsTotalPerMinute)
    }
}

/// A node's attachments: the content-addressed store and the upload registry (both in the
/// files directory, which cluster nodes share), the worker threads every file operation runs
/// on, the limits per channel, and the upload rate limiter.
///
/// Nothing here touches the disk on the caller's thread except through ``pool``.
final class ServerFiles: Sendable {
    let store: FileStore
    let registry: UploadRegistry
    let pool: FileWorkerPool
    /// One thread of its own for the short registry look-ups of a publish with attachments,
    /// so that a publish never waits behind image decoding on ``pool``.
    let checks: FileWorkerPool
    let pipeline: AttachmentPipeline
    let collector: FileCollector
    /// The limits a configuration reload may change (``reconfigure(_:)``).
    private let settings: Mutex<FileSettings>
    /// The longest an upload may take.
    var uploadTimeoutMillis: UInt64 { settings.withLock { $0.uploadTimeoutMillis } }
    /// The parser's body limit for upload requests: the largest file any channel accepts,
    /// plus multipart framing.
    var maxRequestBytes: Int { settings.withLock { $0.maxRequestBytes } }
    private let rates = UploadRateLimiter()
    /// Bytes per day per client address and for the whole server.
    private let bytes = UploadByteBudgets()
    /// Declared image pixels per minute per client address and for the whole server: the
    /// decoder's work (a 191 KB PNG may declare 49 megapixels, seconds of a worker).
    private let pixels = UploadByteBudgets(periodSeconds: 60)
    /// Cluster mode: the budgets every node shares (``useClusterBudgets(_:)``).
    private let clusterBudgets = Mutex<(any BudgetStore)?>(nil)
    /// Bytes each channel holds, as last counted (refreshed from the disk at most every
    /// ``usageRefreshMillis``, since other nodes upload too).
    private let usage = Mutex<[String: (bytes: Int, countedMillis: Int64)]>([:])
    private static let usageRefreshMillis: Int64 = 60_000
    /// `scheme://host:port` of the bound HTTP door, when it is bound to one address.
    private let boundURL = Mutex<String?>(nil)
    /// A garbage collection is running (the next tick skips rather than queueing another).
    let collecting = Atomic<Bool>(false)

    init(configuration: ServerConfiguration) throws {
        let root = configuration.filesDirectory ?? configuration.dataDirectory
        do throws(FileError) {
            store = try FileStore(directory: root)
            registry = try UploadRegistry(store: store)
            pipeline = AttachmentPipeline(store: store, images: try ImageProcessor())
        } catch {
            throw StartupError(description: "cannot use the files directory \(root): \(error.message)")
        }
        pool = FileWorkerPool(threads: configuration.fileWorkers, queueLimit: 1024)
        checks = FileWorkerPool(threads: 1, queueLimit: 4096, name: "parley-checks")
        collector = FileCollector(store: store, registry: registry, policy: FileCollectionPolicy(
            unpublishedGraceMillis: Int64(configuration.uploadGraceSeconds) * 1000,
            publishedGraceMillis: min(600_000, Int64(configuration.uploadGraceSeconds) * 1000)))
        settings = Mutex(FileSettings(configuration))
    }

    /// The limits of `channel`.
    func limits(of channel: String) -> ChannelFileLimits {
        settings.withLock { $0.channels[channel] ?? $0.defaults }
    }

    /// Puts the file limits of a reloaded configuration in force, for uploads that begin
    /// from now on (the directory, the workers and the collection interval need a restart).
    func reconfigure(_ configuration: ServerConfiguration) {
        let fresh = FileSettings(configuration)
        settings.withLock { $0 = fresh }
    }

    /// Stops the worker threads once their queued work is done.
    func shutdown() {
        pool.shutdown()
        checks.shutdown()
    }

    // MARK: links

    /// Called once the HTTP door is bound: links start with its address, unless it listens on
    /// every interface (then there is no address to give, see ``baseURL(for:tls:)``).
    func bound(host: String, port: Int, tls: Bool) {
        guard !["0.0.0.0", "::", "", "[::]"].contains(host) else { return }
        let shown = host.contains(":") ? "[\(host)]" : host
        boundURL.withLock { $0 = "\(tls ? "https" : "http")://\(shown):\(port)" }
    }

    /// `scheme://host[:port]` for the links of an upload made with `head`: `--public-url`,
    /// else the one address the door is bound to, else nothing: the links are path-only
    /// (`/demo/files/ID`). The uploader's `Host` is never used: it would let one client
    /// point everybody's links at a host of its choosing. The browser client resolves a
    /// path against its page, the line door and `parley chat` show it as it is, and any
    /// HTTP client resolves it against the server it talks to.
    func baseURL(for head: HTTPRequestHead, tls: Bool) -> String {
        if let publicURL = settings.withLock({ $0.publicURL }) { return publicURL }
        return boundURL.withLock { $0 } ?? ""
    }

    // MARK: limits

    /// Takes one upload from the allowances it falls under: its client's in its channel
    /// (when the channel has a limit of its own), its client's across all channels, the
    /// server's. The refusal (text, Retry-After seconds) when one is used up. Clients count
    /// by ``IPAddress/limitKey``, so fresh channels or fresh IPv6 addresses of one /64 do not
    /// bring fresh allowances.
    func admitUpload(channel: String, ip: String, nowMillis: Int64) -> (text: String, retryAfter: Int)? {
        let client = IPAddress.limitKey(ip)
        let uploadsPerMinute = settings.withLock { $0.uploadsPerMinute }
        func retry(_ perMinute: Int) -> Int { max(1, 60 / max(1, perMinute)) }
        if let perMinute = limits(of: channel).channelUploadsPerMinute,
           !rates.allow(key: "c\u{0}" + channel + "\u{0}" + client, perMinute: perMinute, nowMillis: nowMillis) {
            return ("too many uploads in channel \"\(channel)\" (limit \(perMinute) per minute); try again shortly", retry(perMinute))
        }
        if !rates.allow(key: "a\u{0}" + client, perMinute: uploadsPerMinute.perClient, nowMillis: nowMillis) {
            return ("too many uploads (limit \(uploadsPerMinute.perClient) per minute from your address); try again shortly",
                    retry(uploadsPerMinute.perClient))
        }
        if !rates.allow(key: "*", perMinute: uploadsPerMinute.total, nowMillis: nowMillis) {
            return ("the server takes no more uploads just now (limit \(uploadsPerMinute.total) per minute); try again shortly",
                    retry(uploadsPerMinute.total))
        }
        return nil
    }

    /// Whether `declared` bytes still fit in the day's budgets of `ip` and of the server
    /// (checked on the head, nothing taken); the refusal's text if not.
    func bytesRefusal(ip: String, declared: Int, nowMillis: Int64) -> String? {
        let client = IPAddress.limitKey(ip)
        let bytesPerDay = settings.withLock { $0.bytesPerDay }
        if bytes.available(key: client, allowance: bytesPerDay.perClient, nowMillis: nowMillis) < Double(declared) {
            return "your address has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.perClient)) per day); try again later"
        }
        if bytes.available(key: "*", allowance: bytesPerDay.total, nowMillis: nowMillis) < Double(declared) {
            return "the server has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.total)) per day); try again later"
        }
        return nil
    }

    /// Takes a finished upload's `size` from the day's budgets of `ip` and of the server,
    /// or throws (nothing taken) when one cannot pay it. Any thread.
    func chargeUpload(ip: String, size: Int, nowMillis: Int64) throws(FileError) {
        let client = IPAddress.limitKey(ip)
        let bytesPerDay = settings.withLock { $0.bytesPerDay }
        guard bytes.take(Double(size), key: client, allowance: bytesPerDay.perClient, nowMillis: nowMillis) else {
            throw FileError(.quota, "your address has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.perClient)) per day)")
        }
        guard bytes.take(Double(size), key: "*", allowance: bytesPerDay.total, nowMillis: nowMillis) else {
            bytes.refund(Double(size), key: client, allowance: bytesPerDay.perClient, nowMillis: nowMillis)
            throw FileError(.quota, "the server has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.total)) per day)")
        }
        guard let shared = clusterBudgets.withLock({ $0 }) else { return }
        // Cluster mode: the same budgets once more, for the whole cluster (the nodes share the
        // files directory, so a client must not get a day's bytes from each node).
        func refundHere() {
            bytes.refund(Double(size), key: client, allowance: bytesPerDay.perClient, nowMillis: nowMillis)
            bytes.refund(Double(size), key: "*", allowance: bytesPerDay.total, nowMillis: nowMillis)
        }
        let day: Int64 = 86_400_000
        let (byClient, byAll): (Bool, Bool)
        do throws(ParleyError) {
            byClient = try shared.take(Double(size), key: "bytes:" + client, allowance: bytesPerDay.perClient, periodMillis: day, nowMillis: nowMillis)
            byAll = byClient ? try shared.take(Double(size), key: "bytes:*", allowance: bytesPerDay.total, periodMillis: day, nowMillis: nowMillis) : false
        } catch {
            refundHere()
            throw FileError(.busy, "the upload budget cannot be checked just now (\(error.message)); try again")
        }
        guard byClient else {
            refundHere()
            throw FileError(.quota, "your address has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.perClient)) per day, all nodes together)")
        }
        guard byAll else {
            _ = try? shared.take(-Double(size), key: "bytes:" + client, allowance: bytesPerDay.perClient, periodMillis: day, nowMillis: nowMillis)
            refundHere()
            throw FileError(.quota, "the cluster has used its upload budget (\(ByteCount.humanReadable(bytesPerDay.total)) per day)")
        }
    }

    /// Cluster mode: the day's upload budgets are also charged to `store`, shared by every node.
    func useClusterBudgets(_ store: any BudgetStore) {
        clusterBudgets.withLock { $0 = store }
    }

    /// Takes an image's declared pixels from the minute's budgets of `ip` and of the server,
    /// before any pixel is decoded; throws `quota` (429, nothing taken) when one cannot pay.
    /// The work is paid for whether or not the image then decodes. Any thread.
    func chargeImageWork(ip: String, header: ImageHeader, nowMillis: Int64) throws(FileError) {
        let client = IPAddress.limitKey(ip)
        let pixelsPerMinute = settings.withLock { $0.pixelsPerMinute }
        let declared = Double(header.width) * Double(header.height)
        let shown = ServerFiles.megapixels(header.width * header.height)
        guard pixels.take(declared, key: client, allowance: pixelsPerMinute.perClient, nowMillis: nowMillis) else {
            throw FileError(.quota, "your address has used its image budget (\(ServerFiles.megapixels(pixelsPerMinute.perClient)) "
                            + "per minute; this image declares \(shown)); try again in a minute")
        }
        guard pixels.take(declared, key: "*", allowance: pixelsPerMinute.total, nowMillis: nowMillis) else {
            pixels.refund(declared, key: client, allowance: pixelsPerMinute.perClient, nowMillis: nowMillis)
            throw FileError(.quota, "the server is busy with images (\(ServerFiles.megapixels(pixelsPerMinute.total)) per minute); "
                            + "try again in a minute")
        }
    }

    /// `49.2 megapixels`, for refusals.
    static func megapixels(_ pixels: Int) -> String {
        let tenths = (pixels + 50_000) / 100_000
        return "\(tenths / 10).\(tenths % 10) megapixels"
    }

    /// Bytes `channel` holds as last counted, without touching the disk (nil: not counted yet).
    func knownUsage(of channel: String) -> Int? {
        usage.withLock { $0[channel]?.bytes }
    }

    /// Bytes `channel` holds, counted from the registry when the count is old. Blocking:
    /// worker threads only.
    func currentUsage(of channel: String, nowMillis: Int64) -> Int {
        if let known = usage.withLock({ $0[channel] }), nowMillis - known.countedMillis < ServerFiles.usageRefreshMillis {
            return known.bytes
        }
        let counted = registry.usage(of: channel)
        usage.withLock { $0[channel] = (counted, nowMillis) }
        return counted
    }

    /// A new upload of `bytes` in `channel`.
    func added(_ bytes: Int, to channel: String) {
        usage.withLock { table in
            if let known = table[channel] { table[channel] = (known.bytes + bytes, known.countedMillis) }
        }
    }

    /// Garbage collection counted every channel: those counts are fresh. A channel that
    /// holds nothing any more is forgotten (counted again from the disk when next asked), so
    /// the table holds only channels with uploads on the disk.
    func counted(_ report: FileCollectionReport, nowMillis: Int64) {
        usage.withLock { table in
            table = report.channelUsage.mapValues { ($0, nowMillis) }
        }
    }
}

/// An allowance per key (a client address, or `*` for the server) that refills continuously
/// over a period: bytes of uploads per day, declared image pixels per minute. This node's
/// share of ParleyCore's ``InMemoryBudgetStore`` with the period fixed.
final class UploadByteBudgets: Sendable {
    private let store = InMemoryBudgetStore()
    private let periodMillis: Int64

    init(periodSeconds: Double = 86_400) { periodMillis = Int64(periodSeconds * 1000) }

    func available(key: String, allowance: Int, nowMillis: Int64) -> Double {
        store.available(key: key, allowance: allowance, periodMillis: periodMillis, nowMillis: nowMillis)
    }

    func take(_ amount: Double, key: String, allowance: Int, nowMillis: Int64) -> Bool {
        store.take(amount, key: key, allowance: allowance, periodMillis: periodMillis, nowMillis: nowMillis)
    }

    /// Gives back what ``take(_:key:allowance:nowMillis:)`` took for an upload refused after all.
    func refund(_ amount: Double, key: String, allowance: Int, nowMillis: Int64) {
        _ = store.take(-amount, key: key, allowance: allowance, periodMillis: periodMillis, nowMillis: nowMillis)
    }
}

/// Uploads per minute per key: token buckets (a minute's allowance as burst).
final class UploadRateLimiter: Sendable {
    static let maxKeys = 10_000
    private let buckets = Mutex<[String: TokenBucket]>([:])

    /// Keys held now (tests).
    var keyCount: Int { buckets.withLock { $0.count } }

    func allow(key: String, perMinute: Int, nowMillis: Int64) -> Bool {
        buckets.withLock { buckets in
            if buckets[key] == nil { TokenBucket.prune(&buckets, maxKeys: Self.maxKeys, pinned: ["*"], nowMillis: nowMillis) }
            let (rate, burst) = (Double(perMinute) / 60, Double(perMinute))
            var bucket = buckets[key].map { $0.burst == burst ? $0 : $0.resized(ratePerSecond: rate, burst: burst) }
                ?? TokenBucket(ratePerSecond: rate, burst: burst)
            let allowed = bucket.take(nowMillis: nowMillis)
            buckets[key] = bucket
            return allowed
        }
    }
}
