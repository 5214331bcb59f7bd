import Foundation
import ParleyCore
import ParleyIO

/// The outcome of a fan-out run.
public struct FanoutResult: Sendable {
    public var options: FanoutOptions
    public var connections = 0
    public var connected = 0
    public var setupSeconds = 0.0
    public var connectTime = LatencyHistogram()
    public var sent = 0
    /// Deliveries expected: every message to every member of its room.
    public var expected = 0
    public var delivered = 0
    /// Deliveries of messages sent in the measured window, and that window's length.
    public var measuredDelivered = 0
    /// Deliveries that arrived inside the measured window: what delivered/s is made of.
    public var receivedInWindow = 0
    public var measuredSeconds = 0.0
    /// CPU seconds (user + system) the servers (`--server-pid`) and this bench spent in the
    /// measured window.
    public var serverCPUSeconds: Double?
    public var benchCPUSeconds: Double?
    /// Deliveries received in the window per CPU-second of the servers.
    public var deliveriesPerServerCPUSecond: Double? {
        guard let cpu = serverCPUSeconds, cpu > 0, cpu.isFinite else { return nil }
        return Double(receivedInWindow) / cpu
    }
    /// The bench's own CPU per frame it received, in microseconds.
    public var benchMicrosPerFrame: Double? {
        guard let cpu = benchCPUSeconds, receivedInWindow > 0 else { return nil }
        return cpu * 1e6 / Double(receivedInWindow)
    }
    public var latency = LatencyHistogram()
    /// With several servers: latency by the receiver's server (`options.urls` order).
    public var latencyByURL: [LatencyHistogram] = []
    /// Members (connections) on each server, publishers included.
    public var membersByURL: [Int] = []
    public var lost = 0
    public var duplicated = 0
    /// Connection failures, server error replies, unexpected closes, messages for the wrong room.
    public var errors = 0
    public var errorSamples: [String] = []
    public var drainedInTime = true

    /// Deliveries that arrived per second of the measured window (receive time, so a backlog
    /// that lands during the drain never counts).
    public var deliveredPerSecond: Double { measuredSeconds > 0 ? Double(receivedInWindow) / measuredSeconds : 0 }
    public var sentPerSecond: Double { measuredSeconds > 0 ? Double(sent) / (options.warmupSeconds + options.durationSeconds) : 0 }
    /// A run is good when nothing was lost or duplicated and nothing went wrong.
    public var isClean: Bool { lost == 0 && duplicated == 0 && errors == 0 && connected == connections }
}

/// `parley bench fanout`: members subscribe, publishers send stamped messages, every receiver
/// records latency and which messages it got.
public enum FanoutRun {
    /// Runs the whole scenario; blocks the calling thread (never call it on an event loop).
    public static func run(_ options: FanoutOptions, progress: @escaping @Sendable (String) -> Void = { _ in }) -> FanoutResult {
        var result = FanoutResult(options: options)
        let total = options.totalConnections
        result.connections = total
        _ = raiseFileLimit()
        let group = EventLoopGroup(loopCount: max(1, options.loops))
        defer { group.shutdown() }
        let loopCount = group.loops.count
        if options.urls.count > 1 {
            result.latencyByURL = Array(repeating: LatencyHistogram(), count: options.urls.count)
            result.membersByURL = Array(repeating: 0, count: options.urls.count)
            for c in 0..<total {
                let room = c / options.members, slot = c % options.members
                let isPublisher = slot * options.rooms + room < options.publishers
                result.membersByURL[options.urlIndex(connection: c, isPublisher: isPublisher)] += 1
            }
        }

        // Connection c: room c / members, slot c % members; publisher p sits in room p % rooms,
        // slot p / rooms; connection c lives on loop c % loops.
        let setupStart = MonotonicTime.nanoseconds()
        _ = LoopCalls.onEach(group) { loop in
            var specs: [ClientSpec] = []
            for c in stride(from: loop.index, to: total, by: loopCount) {
                let room = c / options.members, slot = c % options.members
                let candidate = slot * options.rooms + room
                let publishersInRoom = options.publishers / options.rooms + (room < options.publishers % options.rooms ? 1 : 0)
                let publisher = candidate < options.publishers ? candidate : nil
                var spec = ClientSpec(index: c, room: room, roomName: roomName(room, options), publisher: publisher,
                                      publishersInRoom: publishersInRoom, sourceHost: nil)
                spec.urlIndex = options.urlIndex(connection: c, isPublisher: publisher != nil)
                specs.append(spec)
            }
            let bench = LoopCalls.bench(loop) {
                BenchLoop(loop: loop, door: options.door, urls: options.urls, channel: options.channel,
                          rooms: options.rooms, concurrency: options.connectConcurrency)
            }
            bench.identifySocketIOMembers = options.identifySocketIOMembers
            bench.open(specs)
            return 0
        }
        // Wait until everyone is in (or failed).
        let setupDeadline = MonotonicTime.nanoseconds() + Int64(options.setupTimeoutSeconds * 1e9)
        var lastShown = 0
        while true {
            let reports = LoopCalls.onEach(group) { loop in LoopCalls.bench(loop) { fatalError() }.snapshot() } ?? []
            let ready = reports.reduce(0) { $0 + $1.ready }, failed = reports.reduce(0) { $0 + $1.failed }
            if ready - lastShown >= 5000 { progress("connected \(ready)/\(total)"); lastShown = ready }
            if ready + failed >= total || MonotonicTime.nanoseconds() > setupDeadline { break }
            sleepSeconds(0.02)
        }
        result.setupSeconds = Double(MonotonicTime.nanoseconds() - setupStart) / 1e9
        // Let the server settle after the join storm (join events still in flight).
        sleepSeconds(min(1.0, 0.1 + Double(total) / 50_000))

        let start = MonotonicTime.nanoseconds()
        let measureFrom = start + Int64(options.warmupSeconds * 1e9)
        let measureTo = measureFrom + Int64(options.durationSeconds * 1e9)
        result.measuredSeconds = options.durationSeconds
        let publishersPerLoop = (0..<loopCount).map { l in
            (0..<options.publishers).filter { p in ((p % options.rooms) * options.members + p / options.rooms) % loopCount == l }.count
        }
        _ = LoopCalls.onEach(group) { loop in
            let bench = LoopCalls.bench(loop) { fatalError() }
            var rate: Double?
            if case .perSecond(let total) = options.rate {
                rate = total * Double(publishersPerLoop[loop.index]) / Double(max(1, options.publishers))
            }
            bench.startPublishing(rate: rate, window: options.window, size: options.size, start: start,
                                  measureFrom: measureFrom, measureTo: measureTo, end: measureTo)
            return 0
        }
        progress("publishing for \(options.warmupSeconds + options.durationSeconds) s")
        // CPU time of the servers and of this bench over the measured window.
        sleepSeconds(Double(measureFrom - MonotonicTime.nanoseconds()) / 1e9)
        let serverCPUBefore = options.serverPIDs.map { ProcessCPU.seconds(pid: $0) }
        let benchCPUBefore = ProcessCPU.seconds(pid: nil)
        sleepSeconds(Double(measureTo - MonotonicTime.nanoseconds()) / 1e9)
        let serverCPUAfter = options.serverPIDs.map { ProcessCPU.seconds(pid: $0) }
        let benchCPUAfter = ProcessCPU.seconds(pid: nil)
        if !options.serverPIDs.isEmpty {
            var total = 0.0
            for (before, after) in zip(serverCPUBefore, serverCPUAfter) {
                guard let before, let after else { total = .nan; break }
                total += after - before
            }
            result.serverCPUSeconds = total
        }
        if let before = benchCPUBefore, let after = benchCPUAfter { result.benchCPUSeconds = after - before }

        // Drain: wait until every expected delivery has landed, or give up.
        let drainDeadline = MonotonicTime.nanoseconds() + Int64(options.drainSeconds * 1e9)
        var sent = [Int](repeating: 0, count: options.publishers)
        while true {
            sleepSeconds(0.05)
            let reports = LoopCalls.onEach(group) { loop in LoopCalls.bench(loop) { fatalError() }.snapshot() } ?? []
            for report in reports { for (p, n) in report.sent { sent[p] = n } }
            let expected = sent.reduce(0, +) * options.members
            let unique = reports.reduce(0) { $0 + $1.uniqueDelivered }
            // A starved loop may still owe its last tick: the count of sent is final only
            // once every loop has stopped publishing.
            let stillPublishing = reports.contains { $0.publishing }
            if unique >= expected && !stillPublishing { break }
            if MonotonicTime.nanoseconds() > drainDeadline { result.drainedInTime = false; break }
        }
        let sentFinal = sent
        let finals = LoopCalls.onEach(group) { loop -> LoopReport in
            let bench = LoopCalls.bench(loop) { fatalError() }
            let report = bench.finalReport(sent: sentFinal)
            bench.closeAll()
            return report
        } ?? []
        if finals.count != loopCount {
            result.errors += 1
            result.errorSamples.append("a bench loop did not answer in time")
        }
        result.sent = sentFinal.reduce(0, +)
        result.expected = result.sent * options.members
        for report in finals {
            result.connected += report.ready
            result.delivered += report.uniqueDelivered
            result.measuredDelivered += report.measuredDelivered
            result.receivedInWindow += report.receivedInWindow
            result.duplicated += report.duplicates
            result.lost += report.missing
            result.errors += report.failed + report.serverErrors + report.foreign
            result.latency.merge(report.latency)
            for (index, histogram) in report.latencyByURL.enumerated() where index < result.latencyByURL.count {
                result.latencyByURL[index].merge(histogram)
            }
            result.connectTime.merge(report.connectTime)
            result.errorSamples.append(contentsOf: report.errorSamples)
        }
        // Receivers that dropped out lost everything after they left: count it too.
        result.lost = max(result.lost, result.expected - result.delivered)
        return result
    }

    static func roomName(_ room: Int, _ options: FanoutOptions) -> String {
        switch options.door {
        case .native: "bench-\(room)"
        case .line, .socketio: "lobby"
        }
    }
}
