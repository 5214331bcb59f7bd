extension ServerCore {
    /// `/metrics` as plain text (Prometheus exposition format).
    func metricsText() -> String {
        var lines = ["# HELP parley_open_connections Connections open across all doors.",
                     "# TYPE parley_open_connections gauge",
                     "parley_open_connections \(gate.open.load(ordering: .relaxed))",
                     "# HELP parley_limit_breaches_total Times a client ran into an abuse limit.",
                     "# TYPE parley_limit_breaches_total counter"]
        for limit in Limit.allCases {
            lines.append("parley_limit_breaches_total{limit=\"\(limit.rawValue)\"} \(limits.count(limit))")
        }
        if let cluster { lines += cluster.metricsLines }
        return lines.joined(separator: "\n") + "\n"
    }
}
