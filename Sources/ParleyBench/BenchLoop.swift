import ParleyCore
import ParleyIO

/// A snapshot of one loop's counters, sent back to the coordinating thread.
struct LoopReport: Sendable {
    var ready = 0
    var failed = 0
    var uniqueDelivered = 0
    var duplicates = 0
    var measuredDelivered = 0
    /// Deliveries that arrived inside the measured window (whenever they were sent).
    var receivedInWindow = 0
    var foreign = 0
    var serverErrors = 0
    var lostAfterReady = 0
    var errorSamples: [String] = []
    /// Whether this loop may still send (its last timer tick has not run yet).
    var publishing = false
    /// Messages sent by each publisher on this loop.
    var sent: [Int: Int] = [:]
    var latency = LatencyHistogram()
    /// With several servers: the same latencies by the receiver's server (empty with one).
    var latencyByURL: [LatencyHistogram] = []
    var connectTime = LatencyHistogram()
    /// Per publisher: how many of its messages each of its room's ready receivers is missing.
    var missing = 0
}

/// What one bench loop holds for a run: its connections, counters and histograms.
/// Loop-confined; reached from the coordinating thread only through `EventLoop.execute`.
final class BenchLoop {
    let loop: EventLoop
    let door: BenchDoor
    /// The run's servers; each connection goes to `urls[spec.urlIndex]`.
    let urls: [BenchURL]
    let channel: String
    let rooms: Int
    /// Socket.IO: whether listening members send `connectUser` too (Parley delivers SocketChat
    /// events to identified users only; the original server emits to every socket).
    var identifySocketIOMembers = true
    var clients: [BenchClient] = []
    private var queue: [ClientSpec] = []
    private var queueIndex = 0
    private var connecting = 0
    private let concurrency: Int
    var report = LoopReport()
    var stopping = false

    // publishing
    private var publishers: [BenchClient] = []
    private var timer: LoopTimer?
    private var startNanos: Int64 = 0
    private var measureFrom: Int64 = .max
    private var measureTo: Int64 = .max
    private var endNanos: Int64 = 0
    private var ratePerSecond = 0.0
    private var closedLoopWindow = 0
    private var size = 0
    private var sentTotal = 0
    private var nextPublisher = 0

    init(loop: EventLoop, door: BenchDoor, urls: [BenchURL], channel: String, rooms: Int, concurrency: Int) {
        precondition(!urls.isEmpty, "a bench needs a server")
        self.loop = loop
        self.door = door
        self.urls = urls
        self.channel = channel
        self.rooms = rooms
        self.concurrency = concurrency
        if urls.count > 1 { report.latencyByURL = Array(repeating: LatencyHistogram(), count: urls.count) }
    }

    // MARK: setup

    /// Queues connections; at most `concurrency` are being set up at once.
    func open(_ specs: [ClientSpec]) {
        queue.append(contentsOf: specs)
        pump()
    }

    private func pump() {
        while connecting < concurrency && queueIndex < queue.count && !stopping {
            let client = BenchClient(bench: self, spec: queue[queueIndex])
            queueIndex += 1
            connecting += 1
            clients.append(client)
            if client.spec.publisher != nil { publishers.append(client) }
            client.start()
        }
        if queueIndex == queue.count {
            queue = []
            queueIndex = 0
        }
    }

    func clientReady(_ client: BenchClient, connectNanos: Int64) {
        connecting -= 1
        report.ready += 1
        report.connectTime.record(micros: UInt64(max(0, connectNanos / 1000)))
        pump()
    }

    func clientFailed(_ client: BenchClient, wasReady: Bool, message: String) {
        if wasReady {
            report.ready -= 1
            report.lostAfterReady += 1
        } else {
            connecting -= 1
        }
        report.failed += 1
        if report.errorSamples.count < 5 { report.errorSamples.append(message) }
        pump()
    }

    func serverError(_ text: String) {
        report.serverErrors += 1
        if report.errorSamples.count < 5 { report.errorSamples.append("server: " + text) }
    }

    // MARK: running

    /// Starts publishing: open loop at `rate` messages/s in total for this loop's publishers,
    /// or closed loop with `window` in flight per publisher when `rate` is nil.
    func startPublishing(rate: Double?, window: Int, size: Int, start: Int64, measureFrom: Int64,
                         measureTo: Int64, end: Int64) {
        self.size = size
        self.startNanos = start
        self.measureFrom = measureFrom
        self.measureTo = measureTo
        self.endNanos = end
        guard !publishers.isEmpty else { return }
        if let rate {
            ratePerSecond = rate
            let timer = LoopTimer(loop: loop)
            self.timer = timer
            timer.start(after: 1, repeating: 1) { [unowned self] in self.tick() }
        } else {
            closedLoopWindow = window
            for publisher in publishers {
                for _ in 0..<window { publisher.publish(size: size) }
            }
        }
    }

    private func tick() {
        let now = MonotonicTime.nanoseconds()
        let until = min(now, endNanos)
        let due = Int(Double(until - startNanos) * ratePerSecond / 1e9) - sentTotal
        if due > 0 {
            for _ in 0..<due {
                let publisher = publishers[nextPublisher]
                nextPublisher = (nextPublisher + 1) % publishers.count
                publisher.publish(size: size)
            }
            sentTotal += due
        }
        if now >= endNanos {
            timer?.stop()
            timer = nil
        }
    }

    @inline(__always) func delivered(_ stamp: BenchPayload.Stamp, to client: BenchClient) {
        let publisher = stamp.publisher
        guard publisher % rooms == client.spec.room, publisher / rooms < client.trackers.count else {
            report.foreign += 1
            return
        }
        if client.trackers[publisher / rooms].record(stamp.sequence) {
            report.uniqueDelivered += 1
            let now = MonotonicTime.nanoseconds()
            if now >= measureFrom && now < measureTo { report.receivedInWindow += 1 }
            if stamp.sentNanos >= measureFrom && stamp.sentNanos < measureTo {
                report.measuredDelivered += 1
                let micros = UInt64(max(0, (now - stamp.sentNanos) / 1000))
                report.latency.record(micros: micros)
                if !report.latencyByURL.isEmpty { report.latencyByURL[client.spec.urlIndex].record(micros: micros) }
            }
            if client.spec.publisher == publisher {
                client.inFlight -= 1
                if closedLoopWindow > 0 && now < endNanos { client.publish(size: size) }
            }
        } else {
            report.duplicates += 1
        }
    }

    /// The current counters (sent per publisher included).
    func snapshot() -> LoopReport {
        var copy = report
        copy.publishing = timer != nil || (closedLoopWindow > 0 && MonotonicTime.nanoseconds() < endNanos)
        copy.sent = [:]
        for publisher in publishers { copy.sent[publisher.spec.publisher!] = publisher.sent }
        return copy
    }

    /// Final accounting: messages each receiver never got, given what every publisher sent.
    func finalReport(sent: [Int]) -> LoopReport {
        var copy = snapshot()
        var missing = 0
        for client in clients where client.stage == .ready {
            for k in 0..<client.trackers.count {
                let publisher = client.spec.room + k * rooms
                missing += client.trackers[k].missing(sent: publisher < sent.count ? sent[publisher] : 0)
            }
        }
        copy.missing = missing
        return copy
    }

    func closeAll() {
        stopping = true
        timer?.stop()
        timer = nil
        for client in clients { client.close() }
    }
}
