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
    /// Uploads per minute per client (IP address).
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
        uploadsPerMinute = channel?.uploadsPerMinute ?? configuration.uploadsPerMinute
        quotaBytes = channel?.filesQuotaBytes ?? configuration.filesQuotaBytes
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
    let pipeline: AttachmentPipeline
    let collector: FileCollector
    /// The longest an upload may take.
    let uploadTimeoutMillis: UInt64
    /// The parser's body limit for upload requests: the largest file any channel accepts,
    /// plus multipart framing.
    let maxRequestBytes: Int
    private let defaults: ChannelFileLimits
    private let channels: [String: ChannelFileLimits]
    private let publicURL: String?
    private let rates = UploadRateLimiter()
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
        collector = FileCollector(store: store, registry: registry, policy: FileCollectionPolicy(
            unpublishedGraceMillis: Int64(configuration.uploadGraceSeconds) * 1000,
            publishedGraceMillis: min(600_000, Int64(configuration.uploadGraceSeconds) * 1000)))
        uploadTimeoutMillis = configuration.uploadTimeoutMillis
        publicURL = configuration.publicURL
        defaults = ChannelFileLimits(configuration, nil)
        var channels: [String: ChannelFileLimits] = [:]
        for channel in configuration.channels { channels[channel.id] = ChannelFileLimits(configuration, channel) }
        self.channels = channels
        let largest = ([defaults] + channels.values).map(\.maxBytes).max() ?? defaults.maxBytes
        maxRequestBytes = largest + ChannelFileLimits.multipartOverhead
    }

    /// The limits of `channel`.
    func limits(of channel: String) -> ChannelFileLimits { channels[channel] ?? defaults }

    /// Stops the worker threads once their queued work is done.
    func shutdown() { pool.shutdown() }

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
        if let publicURL { return publicURL }
        return boundURL.withLock { $0 } ?? ""
    }

    // MARK: limits

    /// Takes one upload from `ip`'s allowance in `channel`; false when it is used up.
    func allowUpload(channel: String, ip: String, nowMillis: Int64) -> Bool {
        rates.allow(key: channel + "\u{0}" + ip, perMinute: limits(of: channel).uploadsPerMinute, nowMillis: nowMillis)
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

    /// Garbage collection counted every channel: those counts are fresh.
    func counted(_ report: FileCollectionReport, nowMillis: Int64) {
        usage.withLock { table in
            for channel in Set(table.keys).union(report.channelUsage.keys) {
                table[channel] = (report.channelUsage[channel] ?? 0, nowMillis)
            }
        }
    }
}

/// Uploads per minute per client and channel: token buckets (a minute's allowance as burst).
final class UploadRateLimiter: Sendable {
    private let buckets = Mutex<[String: TokenBucket]>([:])

    func allow(key: String, perMinute: Int, nowMillis: Int64) -> Bool {
        buckets.withLock { buckets in
            if buckets.count > 10_000 {
                buckets = buckets.filter { !$0.value.isFull(nowMillis: nowMillis) }
            }
            var bucket = buckets[key] ?? TokenBucket(ratePerSecond: Double(perMinute) / 60, burst: Double(perMinute))
            let allowed = bucket.take(nowMillis: nowMillis)
            buckets[key] = bucket
            return allowed
        }
    }
}
