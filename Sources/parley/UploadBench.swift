import Dispatch
import Foundation
import ParleyBench
import ParleyClient
import ParleyCore
import Synchronization

/// `parley bench upload`: upload throughput of images (decoding, cleaning and thumbnailing
/// included) and the server's memory while many uploads run at once.
///
/// Each upload is a different PNG of about `--size` bytes (noise, so it neither compresses
/// nor deduplicates), sent by `--concurrency` uploaders in parallel over Parley's own HTTP
/// client; the server's resident memory (`/proc/PID/status`) is sampled every 50 ms when
/// `--server-pid` is given.
enum UploadBench {
    struct Options {
        var url = ""
        var channel = "bench"
        var room = "bench"
        var size = 1 << 20
        var uploads = 100
        var concurrency = 20
        var serverPID: Int32?
        var json = false
    }

    static let usage = """
    usage: parley bench upload --url URL [--size BYTES] [--uploads N] [--concurrency N]
                               [--channel ID] [--room NAME] [--server-pid PID] [--json]

    Uploads N different PNG images of about BYTES each (default 1048576) to POST /CHANNEL/files,
    CONCURRENCY at a time (default 20), and reports uploads/s, MB/s, latency and, with
    --server-pid, the server's resident memory before, at its peak, and after. URL is the
    server's http:// (or ws://) address. Run the server with a higher upload rate and quota,
    e.g. parley serve --upload-rate 1000000 --files-quota 100000000000.
    """

    static func parse(_ arguments: [String]) throws(ChatOptionError) -> Options? {
        var options = Options()
        var rest = arguments[...]
        func value(_ flag: String) throws(ChatOptionError) -> String {
            guard let next = rest.popFirst() else { throw ChatOptionError(message: "\(flag) needs a value") }
            return next
        }
        func number(_ flag: String, _ range: ClosedRange<Int>) throws(ChatOptionError) -> Int {
            let text = try value(flag)
            guard let n = Int(text), range.contains(n) else {
                throw ChatOptionError(message: "\(flag) must be a whole number in \(range.lowerBound)...\(range.upperBound)")
            }
            return n
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--url": options.url = try value(argument)
            case "--channel": options.channel = try value(argument)
            case "--room": options.room = try value(argument)
            case "--size": options.size = try number(argument, 100...(1 << 30))
            case "--uploads": options.uploads = try number(argument, 1...1_000_000)
            case "--concurrency": options.concurrency = try number(argument, 1...10_000)
            case "--server-pid": options.serverPID = Int32(try number(argument, 1...Int(Int32.max)))
            case "--json": options.json = true
            case "--help", "-h": return nil
            default: throw ChatOptionError(message: "unknown option \(argument)")
            }
        }
        guard !options.url.isEmpty else { throw ChatOptionError(message: "--url is required") }
        return options
    }

    /// A PNG of about `bytes` bytes: `seed` noise in stored (uncompressed) deflate blocks.
    static func png(bytes: Int, seed: UInt64) -> Data {
        let side = max(8, Int(Double(bytes / 3).squareRoot()))
        var generator = SplitMix(seed: seed)
        var raw: [UInt8] = []
        raw.reserveCapacity(side * (side * 3 + 1))
        for _ in 0..<side {
            raw.append(0)
            for _ in 0..<(side * 3) { raw.append(UInt8(truncatingIfNeeded: generator.next())) }
        }
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return u32(UInt32(data.count)) + body + u32(crc32(body))
        }
        var zlib: [UInt8] = [0x78, 0x01]
        var offset = 0
        while offset < raw.count {
            let end = min(raw.count, offset + 65_535)
            let length = UInt16(end - offset)
            zlib += [end == raw.count ? 1 : 0, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
            zlib += raw[offset..<end]
            offset = end
        }
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in raw {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        zlib += u32(b << 16 | a)
        let header = u32(UInt32(side)) + u32(UInt32(side)) + [8, 2, 0, 0, 0]
        return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", zlib) + chunk("IEND", []))
    }

    private static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes { crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }

    /// Shared by the uploaders and the memory sampler.
    final class Counters: Sendable {
        let next = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        let sampling = Atomic<Bool>(true)
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Runs the bench; the report, and whether every upload succeeded.
    static func run(_ options: Options) async -> (String, Bool) {
        guard let url = URL(string: options.url) else { return ("bad --url \(options.url)", false) }
        let uploader = FileUploader()
        let counters = Counters()
        let before = options.serverPID.flatMap { residentKiB(pid: $0) }
        if let pid = options.serverPID {
            Thread.detachNewThread {
                while counters.sampling.load(ordering: .relaxed) {
                    if let kib = residentKiB(pid: pid) { _ = counters.peak.max(kib, ordering: .relaxed) }
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }
        }
        let pngSize = png(bytes: options.size, seed: 0).count
        let start = ContinuousClock.now
        let results = await withTaskGroup(of: [(Duration, String?)].self) { group in
            for worker in 0..<min(options.concurrency, options.uploads) {
                group.addTask {
                    var mine: [(Duration, String?)] = []
                    while true {
                        let index = counters.next.wrappingAdd(1, ordering: .relaxed).oldValue
                        guard index < options.uploads else { break }
                        let image = png(bytes: options.size, seed: UInt64(index) &* 7919 &+ UInt64(worker))
                        let began = ContinuousClock.now
                        do throws(ParleyClientError) {
                            _ = try await uploader.upload(.data(image), name: "bench-\(index).png", mime: "image/png",
                                                          channel: options.channel, room: options.room, serverURL: url)
                            mine.append((ContinuousClock.now - began, nil))
                        } catch {
                            mine.append((ContinuousClock.now - began, error.message))
                        }
                    }
                    return mine
                }
            }
            var all: [(Duration, String?)] = []
            for await part in group { all += part }
            return all
        }
        let elapsed = ContinuousClock.now - start
        counters.sampling.store(false, ordering: .relaxed)
        let after = options.serverPID.flatMap { residentKiB(pid: $0) }
        let failures = results.compactMap(\.1)
        let seconds = max(0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        let latencies = results.map { Double($0.0.components.seconds) * 1000 + Double($0.0.components.attoseconds) / 1e15 }.sorted()
        func percentile(_ p: Double) -> Double { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        let ok = results.count - failures.count
        let bytes = Double(ok * pngSize)
        var fields: [(String, JSONValue)] = [
            ("uploads", .number(JSONNumber(results.count))), ("failed", .number(JSONNumber(failures.count))),
            ("concurrency", .number(JSONNumber(options.concurrency))), ("bytes_each", .number(JSONNumber(options.size))),
            ("seconds", .number(JSONNumber(seconds))), ("uploads_per_second", .number(JSONNumber(Double(ok) / seconds))),
            ("megabytes_per_second", .number(JSONNumber(bytes / seconds / 1_000_000))),
            ("latency_ms_p50", .number(JSONNumber(percentile(0.5)))), ("latency_ms_p95", .number(JSONNumber(percentile(0.95)))),
            ("latency_ms_max", .number(JSONNumber(latencies.last ?? 0))),
        ]
        if let before { fields.append(("server_rss_kib_before", .number(JSONNumber(before)))) }
        if options.serverPID != nil { fields.append(("server_rss_kib_peak", .number(JSONNumber(counters.peak.load(ordering: .relaxed))))) }
        if let after { fields.append(("server_rss_kib_after", .number(JSONNumber(after)))) }
        if let first = failures.first { fields.append(("first_error", .string(first))) }
        if options.json { return (JSONValue.object(JSONObject(fields)).jsonString, failures.isEmpty) }
        var lines = [(failures.isEmpty ? "" : "FAILED: \(failures.count) uploads failed (first: \(failures[0]))\n")
            + "upload: \(results.count) PNGs of \(ByteCount.humanReadable(options.size)), \(options.concurrency) at a time"]
        lines.append(String(format: "  %.1f uploads/s, %.1f MB/s, %.2f s", Double(ok) / seconds, bytes / seconds / 1_000_000, seconds))
        lines.append(String(format: "  latency ms: p50 %.0f, p95 %.0f, max %.0f", percentile(0.5), percentile(0.95), latencies.last ?? 0))
        if options.serverPID != nil {
            lines.append("  server memory: \(before.map { "\($0 / 1024) MiB" } ?? "?") before, "
                + "\(counters.peak.load(ordering: .relaxed) / 1024) MiB peak, \(after.map { "\($0 / 1024) MiB" } ?? "?") after")
        }
        return (lines.joined(separator: "\n"), failures.isEmpty)
    }
}
