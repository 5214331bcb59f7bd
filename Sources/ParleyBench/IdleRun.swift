import Foundation
import ParleyCore
import ParleyIO

/// The outcome of an idle run.
public struct IdleResult: Sendable {
    public struct Checkpoint: Sendable {
        public var connections: Int
        /// Server resident memory (KiB) at this point, when a pid was given.
        public var serverKiB: Int?
        /// (now − before) / connections, in bytes.
        public var bytesPerConnection: Double?
    }
    public var options: IdleOptions
    public var fileLimit = 0
    public var serverKiBBefore: Int?
    public var checkpoints: [Checkpoint] = []
    public var connected = 0
    public var connectTime = LatencyHistogram()
    public var setupSeconds = 0.0
    public var errors = 0
    public var errorSamples: [String] = []
    /// Connections dropped by the server while being held.
    public var droppedWhileHeld = 0
    public var isClean: Bool { errors == 0 && connected == options.connections && droppedWhileHeld == 0 }
}

/// `parley bench idle`: opens and holds N native connections (handshake + subscribe).
public enum IdleRun {
    /// Descriptors the bench keeps for itself besides its connections.
    static let reservedFiles = 64

    /// How many connections this process can hold after raising its soft limit.
    public static func capacity() -> (limit: Int, connections: Int) {
        let limit = raiseFileLimit()
        return (limit, max(0, limit - reservedFiles))
    }

    public static func run(_ options: IdleOptions, progress: @escaping @Sendable (String) -> Void = { _ in }) -> IdleResult {
        var result = IdleResult(options: options)
        let (limit, _) = capacity()
        result.fileLimit = limit
        result.serverKiBBefore = residentKiB(pids: options.serverPIDs)
        let group = EventLoopGroup(loopCount: max(1, options.loops))
        defer { group.shutdown() }
        let loopCount = group.loops.count
        var marks = options.reportAt.filter { $0 > 0 && $0 < options.connections }.sorted()
        marks.append(options.connections)
        let spread = options.connections > options.perAddress
        let setupStart = MonotonicTime.nanoseconds()
        var opened = 0
        var failedTotal = 0
        for mark in marks {
            let from = opened, to = mark
            _ = LoopCalls.onEach(group) { loop in
                var specs: [ClientSpec] = []
                for c in stride(from: from + ((loop.index - from % loopCount) + loopCount) % loopCount, to: to, by: loopCount) {
                    let source = spread ? "127.0.0.\(1 + c / options.perAddress)" : nil
                    var spec = ClientSpec(index: c, room: 0, roomName: options.room, publisher: nil,
                                          publishersInRoom: 0, sourceHost: source)
                    spec.urlIndex = c % options.urls.count
                    specs.append(spec)
                }
                let bench = LoopCalls.bench(loop) {
                    BenchLoop(loop: loop, door: .native, urls: options.urls, channel: options.channel,
                              rooms: 1, concurrency: options.connectConcurrency)
                }
                bench.open(specs)
                return 0
            }
            opened = to
            let deadline = MonotonicTime.nanoseconds() + Int64(options.setupTimeoutSeconds * 1e9)
            var ready = 0
            while true {
                sleepSeconds(0.05)
                let reports = LoopCalls.onEach(group) { loop in LoopCalls.bench(loop) { fatalError() }.snapshot() } ?? []
                ready = reports.reduce(0) { $0 + $1.ready }
                failedTotal = reports.reduce(0) { $0 + $1.failed }
                if ready + failedTotal >= to || MonotonicTime.nanoseconds() > deadline { break }
            }
            progress("holding \(ready) connections")
            // Let the server finish its allocations for the last joins before reading memory.
            sleepSeconds(1.0)
            var checkpoint = IdleResult.Checkpoint(connections: ready)
            if let now = residentKiB(pids: options.serverPIDs) {
                checkpoint.serverKiB = now
                if let before = result.serverKiBBefore, ready > 0 {
                    checkpoint.bytesPerConnection = Double(now - before) * 1024 / Double(ready)
                }
            }
            result.checkpoints.append(checkpoint)
            if failedTotal > 0 { break }
        }
        result.setupSeconds = Double(MonotonicTime.nanoseconds() - setupStart) / 1e9
        sleepSeconds(options.holdSeconds)
        let finals = LoopCalls.onEach(group) { loop -> LoopReport in
            let bench = LoopCalls.bench(loop) { fatalError() }
            let report = bench.snapshot()
            bench.closeAll()
            return report
        } ?? []
        for report in finals {
            result.connected += report.ready
            result.errors += report.failed + report.serverErrors
            result.droppedWhileHeld += report.lostAfterReady
            result.connectTime.merge(report.connectTime)
            result.errorSamples.append(contentsOf: report.errorSamples)
        }
        return result
    }
}
