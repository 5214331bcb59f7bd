import Synchronization

/// The last 15 minutes of the numbers the dashboard charts, sampled every few seconds on a
/// loop timer: opening the dashboard shows the recent past at once. Bounded (a ring).
final class StatsHistory: Sendable {
    struct Sample: Sendable, Equatable {
        /// Unix milliseconds.
        let timeMillis: Int64
        /// Connections open, by door.
        let connections: [DoorKind: Int]
        /// Messages received per second since the sample before, all doors.
        let messagesPerSecond: Double
        /// Room events written to subscribers per second since the sample before.
        let deliveriesPerSecond: Double
    }

    let intervalMillis: Int64
    let capacity: Int
    private let state = Mutex<(samples: [Sample], lastReceived: Int, lastDelivered: Int, lastMillis: Int64?)>(([], 0, 0, nil))

    init(intervalMillis: Int64 = 5_000, spanMillis: Int64 = 15 * 60_000) {
        self.intervalMillis = intervalMillis
        capacity = Int(spanMillis / intervalMillis)
    }

    /// Records one sample from the running totals.
    func record(nowMillis: Int64, connections: [DoorKind: Int], receivedTotal: Int, deliveredTotal: Int) {
        state.withLock { state in
            var perSecond = (received: 0.0, delivered: 0.0)
            if let last = state.lastMillis, nowMillis > last {
                let seconds = Double(nowMillis - last) / 1000
                perSecond = (Double(max(0, receivedTotal - state.lastReceived)) / seconds,
                             Double(max(0, deliveredTotal - state.lastDelivered)) / seconds)
            }
            state.lastMillis = nowMillis
            state.lastReceived = receivedTotal
            state.lastDelivered = deliveredTotal
            state.samples.append(Sample(timeMillis: nowMillis, connections: connections,
                                        messagesPerSecond: perSecond.received, deliveriesPerSecond: perSecond.delivered))
            if state.samples.count > capacity { state.samples.removeFirst(state.samples.count - capacity) }
        }
    }

    var samples: [Sample] { state.withLock { $0.samples } }
}

extension ServerCore {
    /// Takes the dashboard's sample now (called on a loop timer).
    func sampleStats() {
        var connections: [DoorKind: Int] = [:]
        for (door, count) in metrics.openConnections.all { connections[door] = count }
        let received = metrics.messagesReceived.all.reduce(0) { $0 + $1.1 }
        let delivered = metrics.loops.reduce(0) { total, loop in total + loop.delivered.all.reduce(0) { $0 + $1.1 } }
        statsHistory.record(nowMillis: hub.clock.nowMillis(), connections: connections, receivedTotal: received, deliveredTotal: delivered)
    }
}
