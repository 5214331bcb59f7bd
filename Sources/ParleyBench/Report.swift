import Foundation
import ParleyCore

func fixed(_ value: Double, _ digits: Int = 3) -> String { String(format: "%.\(digits)f", value) }
func millis(_ micros: UInt64) -> Double { Double(micros) / 1000 }

extension JSONWriter {
    mutating func writeDouble(_ value: Double, digits: Int = 3) {
        writeRawValue(Array((value.isFinite ? fixed(value, digits) : "null").utf8))
    }

    mutating func writeLatency(_ h: LatencyHistogram) {
        beginObject()
        for (name, p) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p999", 99.9)] {
            key(name); writeDouble(millis(h.percentile(p)))
        }
        key("max"); writeDouble(millis(h.count > 0 ? h.max : 0))
        key("mean"); writeDouble(h.mean / 1000)
        key("count"); writeInt(Int(h.count))
        endObject()
    }
}

extension FanoutResult {
    /// One JSON object: the figures first, then the scenario.
    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("ok"); w.writeBool(isClean)
        w.key("delivered_per_s"); w.writeDouble(deliveredPerSecond, digits: 1)
        w.key("latency_ms"); w.writeLatency(latency)
        w.key("lost"); w.writeInt(lost)
        w.key("duplicated"); w.writeInt(duplicated)
        w.key("errors"); w.writeInt(errors)
        w.key("error_samples"); w.beginArray(); for e in errorSamples.prefix(5) { w.writeString(e) }; w.endArray()
        w.key("sent"); w.writeInt(sent)
        w.key("expected_deliveries"); w.writeInt(expected)
        w.key("delivered"); w.writeInt(delivered)
        w.key("measured_deliveries"); w.writeInt(measuredDelivered)
        w.key("connections"); w.writeInt(connections)
        w.key("connected"); w.writeInt(connected)
        if let cpu = serverCPUSeconds { w.key("server_cpu_s"); w.writeDouble(cpu) }
        if let rate = deliveriesPerServerCPUSecond { w.key("deliveries_per_server_cpu_s"); w.writeDouble(rate, digits: 0) }
        if let cpu = benchCPUSeconds { w.key("bench_cpu_s"); w.writeDouble(cpu) }
        if let micros = benchMicrosPerFrame { w.key("bench_us_per_frame"); w.writeDouble(micros) }
        w.key("setup_s"); w.writeDouble(setupSeconds)
        w.key("connect_ms"); w.writeLatency(connectTime)
        if !latencyByURL.isEmpty {
            // Per server: members there and their latency (the first holds the publishers).
            w.key("by_url"); w.beginArray()
            for (index, url) in options.urls.enumerated() where index < latencyByURL.count {
                w.beginObject()
                w.key("url"); w.writeString("\(url.hostHeader)\(url.path)")
                w.key("members"); w.writeInt(index < membersByURL.count ? membersByURL[index] : 0)
                w.key("latency_ms"); w.writeLatency(latencyByURL[index])
                w.endObject()
            }
            w.endArray()
        }
        w.key("scenario"); w.beginObject()
        w.key("door"); w.writeString(options.door.rawValue)
        w.key("url"); w.writeString("\(options.url.hostHeader)\(options.url.path)")
        w.key("rooms"); w.writeInt(options.rooms)
        w.key("members"); w.writeInt(options.members)
        w.key("publishers"); w.writeInt(options.publishers)
        switch options.rate {
        case .perSecond(let r): w.key("rate"); w.writeDouble(r, digits: 1)
        case .max: w.key("rate"); w.writeString("max"); w.key("window"); w.writeInt(options.window)
        }
        w.key("size"); w.writeInt(options.size)
        w.key("duration_s"); w.writeDouble(options.durationSeconds)
        w.key("warmup_s"); w.writeDouble(options.warmupSeconds)
        w.key("loops"); w.writeInt(options.loops)
        w.endObject()
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// A short table; the first line says whether the run is clean.
    public var table: String {
        var lines: [String] = []
        if isClean {
            lines.append("OK: \(delivered) deliveries, nothing lost or duplicated, no errors")
        } else {
            lines.append("FAILED: lost \(lost), duplicated \(duplicated), errors \(errors), connected \(connected)/\(connections)"
                         + (drainedInTime ? "" : " (deliveries still missing after the drain period)"))
        }
        let rate: String = switch options.rate {
        case .perSecond(let r): "\(fixed(r, 0)) msg/s"
        case .max: "max (window \(options.window))"
        }
        lines.append("scenario        \(options.door.rawValue) \(options.rooms) room(s) x \(options.members) members, \(options.publishers) publisher(s), \(rate), \(options.size) B, \(fixed(options.durationSeconds, 1)) s (+\(fixed(options.warmupSeconds, 1)) s warm-up), \(options.loops) loops")
        lines.append("delivered/s     \(fixed(deliveredPerSecond, 0))   (sent \(sent), delivered \(delivered) of \(expected))")
        lines.append("latency ms      p50 \(fixed(millis(latency.percentile(50))))  p90 \(fixed(millis(latency.percentile(90))))  p99 \(fixed(millis(latency.percentile(99))))  p99.9 \(fixed(millis(latency.percentile(99.9))))  max \(fixed(millis(latency.count > 0 ? latency.max : 0)))")
        for (index, url) in options.urls.enumerated() where index < latencyByURL.count {
            let h = latencyByURL[index]
            let members = index < membersByURL.count ? membersByURL[index] : 0
            lines.append("  on \(url.hostHeader)  \(members) members\(index == 0 ? " (publishers here)" : "")  p50 \(fixed(millis(h.percentile(50))))  p99 \(fixed(millis(h.percentile(99))))  max \(fixed(millis(h.count > 0 ? h.max : 0)))")
        }
        lines.append("connect ms      p50 \(fixed(millis(connectTime.percentile(50))))  p99 \(fixed(millis(connectTime.percentile(99))))  max \(fixed(millis(connectTime.count > 0 ? connectTime.max : 0)))  (all in \(fixed(setupSeconds, 2)) s)")
        if let cpu = serverCPUSeconds {
            lines.append("server CPU      \(fixed(cpu, 2)) s in the window: \(deliveriesPerServerCPUSecond.map { fixed($0, 0) } ?? "-") deliveries per CPU-second")
        }
        if let cpu = benchCPUSeconds {
            lines.append("bench CPU       \(fixed(cpu, 2)) s in the window: \(benchMicrosPerFrame.map { fixed($0, 3) } ?? "-") us per frame received")
        }
        lines.append("lost \(lost)  duplicated \(duplicated)  errors \(errors)")
        for sample in errorSamples.prefix(5) { lines.append("  error: \(sample)") }
        return lines.joined(separator: "\n")
    }
}

extension IdleResult {
    public var json: String {
        var w = JSONWriter()
        w.beginObject()
        w.key("ok"); w.writeBool(isClean)
        w.key("connections"); w.writeInt(options.connections)
        w.key("connected"); w.writeInt(connected)
        w.key("errors"); w.writeInt(errors)
        w.key("dropped_while_held"); w.writeInt(droppedWhileHeld)
        w.key("error_samples"); w.beginArray(); for e in errorSamples.prefix(5) { w.writeString(e) }; w.endArray()
        w.key("file_limit"); w.writeInt(fileLimit)
        w.key("setup_s"); w.writeDouble(setupSeconds)
        w.key("connect_ms"); w.writeLatency(connectTime)
        if !options.serverPIDs.isEmpty {
            w.key("server_pids"); w.beginArray(); for pid in options.serverPIDs { w.writeInt(Int(pid)) }; w.endArray()
        }
        if let before = serverKiBBefore { w.key("server_rss_kib_before"); w.writeInt(before) }
        w.key("checkpoints"); w.beginArray()
        for c in checkpoints {
            w.beginObject()
            w.key("connections"); w.writeInt(c.connections)
            if let kib = c.serverKiB { w.key("server_rss_kib"); w.writeInt(kib) }
            if let per = c.bytesPerConnection { w.key("server_bytes_per_connection"); w.writeDouble(per, digits: 0) }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    public var table: String {
        var lines: [String] = []
        if isClean {
            lines.append("OK: held \(connected) connections, no errors")
        } else {
            lines.append("FAILED: connected \(connected)/\(options.connections), errors \(errors), dropped while held \(droppedWhileHeld)")
        }
        lines.append("connect ms      p50 \(fixed(millis(connectTime.percentile(50))))  p99 \(fixed(millis(connectTime.percentile(99))))  max \(fixed(millis(connectTime.count > 0 ? connectTime.max : 0)))  (all in \(fixed(setupSeconds, 2)) s)")
        if let before = serverKiBBefore { lines.append("server RSS before   \(before) KiB") }
        for c in checkpoints {
            var line = "connections \(String(c.connections).padding(toLength: 7, withPad: " ", startingAt: 0))"
            if let kib = c.serverKiB { line += "  server RSS \(kib) KiB" }
            if let per = c.bytesPerConnection { line += "  \(fixed(per / 1024, 2)) KiB/connection" }
            lines.append(line)
        }
        for sample in errorSamples.prefix(5) { lines.append("  error: \(sample)") }
        return lines.joined(separator: "\n")
    }
}
