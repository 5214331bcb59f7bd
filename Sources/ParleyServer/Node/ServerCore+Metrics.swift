import ParleyCore
import ParleyIO

extension ServerCore {
    /// `/metrics` as plain text (Prometheus exposition format 0.0.4). Everything is read now:
    /// counters kept by the doors, the hub's rooms, the gate, the loops' byte counts, the
    /// process, and what the registered providers add (cluster mode's Redis state).
    func metricsText() -> String {
        var out = PrometheusText()
        out.family("parley_open_connections", "gauge", help: "Connections open across all doors.")
        out.sample("parley_open_connections", gate.open.load(ordering: .relaxed))
        out.family("parley_limit_breaches_total", "counter", help: "Times a client ran into an abuse limit.")
        for limit in Limit.allCases {
            out.sample("parley_limit_breaches_total", limits.count(limit), labels: ["limit": limit.rawValue])
        }

        out.family("parley_connections", "gauge", help: "Connections open now, by the door that holds them.")
        for (door, count) in metrics.openConnections.all { out.sample("parley_connections", count, labels: ["door": door.rawValue]) }
        out.family("parley_connections_accepted_total", "counter", help: "Connections accepted since start, by door.")
        for (door, count) in metrics.acceptedConnections.all {
            out.sample("parley_connections_accepted_total", count, labels: ["door": door.rawValue])
        }
        out.family("parley_identified_clients", "gauge", help: "Connections that said who they are (handshake, iam:, CONNECT).")
        out.sample("parley_identified_clients", directory.count)

        out.family("parley_messages_received_total", "counter", help: "Messages a door took in for publishing (typing included), by door.")
        for (door, count) in metrics.messagesReceived.all {
            out.sample("parley_messages_received_total", count, labels: ["door": door.rawValue])
        }
        out.family("parley_messages_delivered_total", "counter", help: "Room events written to subscribers, by the subscriber's door.")
        for door in DoorKind.allCases {
            let total = metrics.loops.reduce(0) { $0 + $1.delivered.counter(door).count }
            out.sample("parley_messages_delivered_total", total, labels: ["door": door.rawValue])
        }
        out.family("parley_publishes_refused_total", "counter", help: "Publishes refused, by reason.")
        for (reason, count) in metrics.publishesRefused.all {
            out.sample("parley_publishes_refused_total", count, labels: ["reason": reason.rawValue])
        }

        let bounds = MetricHistogram.latencyBoundsMicros
        var fanOut = HistogramSum(bounds: bounds.count)
        for loop in metrics.loops { fanOut.add(loop.fanOut) }
        out.family("parley_fanout_latency_seconds", "histogram",
                   help: "From a stored message's acceptance to its loop having written it to the last subscriber there.")
        out.histogram("parley_fanout_latency_seconds", boundsMicros: bounds, counts: fanOut.counts, sumMicros: fanOut.sumMicros)
        var commit = HistogramSum(bounds: bounds.count)
        commit.add(metrics.storeCommit)
        out.family("parley_store_commit_seconds", "histogram", help: "From a message's append to the store's answer (durable or failed).")
        out.histogram("parley_store_commit_seconds", boundsMicros: bounds, counts: commit.counts, sumMicros: commit.sumMicros)
        out.family("parley_store_queue_depth", "gauge", help: "Appends waiting for the store's writer or being committed.")
        out.sample("parley_store_queue_depth", metrics.storeQueueDepth.current)
        out.family("parley_store_errors_total", "counter", help: "Appends the store failed.")
        out.sample("parley_store_errors_total", metrics.storeErrors.count)

        out.family("parley_rooms_in_memory", "gauge", help: "Rooms this node holds in memory.")
        out.sample("parley_rooms_in_memory", hub.roomsInMemory)
        out.family("parley_room_members", "gauge", help: "Members of the rooms in memory, summed over rooms.")
        out.sample("parley_room_members", hub.membersInMemory)

        out.family("parley_received_bytes_total", "counter", help: "Bytes read from sockets (TLS records included).")
        out.sample("parley_received_bytes_total", loops.reduce(0) { $0 + $1.statistics.bytesRead })
        out.family("parley_sent_bytes_total", "counter", help: "Bytes written to sockets (TLS records included).")
        out.sample("parley_sent_bytes_total", loops.reduce(0) { $0 + $1.statistics.bytesWritten })

        out.family("parley_config_reloads_total", "counter", help: "SIGHUP configuration reloads, by outcome.")
        for (outcome, count) in metrics.configurationReloads.all {
            out.sample("parley_config_reloads_total", count, labels: ["outcome": outcome.rawValue])
        }
        out.family("parley_draining", "gauge", help: "1 while the server drains before stopping (/readyz answers 503).")
        out.sample("parley_draining", readiness.isDraining ? 1 : 0)
        out.family("parley_build_info", "gauge", help: "The running build (always 1).")
        out.sample("parley_build_info", 1, labels: ["version": BuildInfo.version, "commit": BuildInfo.commit])
        out.family("parley_uptime_seconds", "gauge", help: "Seconds since the server started.")
        out.sample("parley_uptime_seconds", Double(MonotonicTime.milliseconds() - startedMonotonicMillis) / 1000)

        let process = ProcessStatistics.read()
        out.single("process_resident_memory_bytes", "gauge", help: "Resident memory size in bytes.", process.residentBytes.map(Double.init))
        out.single("process_virtual_memory_bytes", "gauge", help: "Virtual memory size in bytes.", process.virtualBytes.map(Double.init))
        out.single("process_open_fds", "gauge", help: "Open file descriptors.", process.openFileDescriptors.map(Double.init))
        out.single("process_max_fds", "gauge", help: "Most open file descriptors allowed.", process.maxFileDescriptors.map(Double.init))
        out.single("process_cpu_seconds_total", "counter", help: "User and system CPU time spent, in seconds.", process.cpuSeconds)
        out.single("process_threads", "gauge", help: "Threads of the process.", process.threads.map(Double.init))
        out.family("process_start_time_seconds", "gauge", help: "Start time of the process since the Unix epoch, in seconds.")
        out.sample("process_start_time_seconds", Double(startedUnixMillis) / 1000)

        for door in doors.all { door.writeMetrics(self, into: &out) }
        for provider in metricsProviders { provider(&out) }
        return out.text
    }
}
