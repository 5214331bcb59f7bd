import Foundation
import ParleyCore
import ParleyLog
import ParleyServer
import ParleyTestSupport

/// A logger that keeps every line (at `level` and above) for the test to read.
func memoryLogger(level: LogLevel = .debug) -> (Logger, MemoryLogHandler) {
    let memory = MemoryLogHandler()
    return (Logger(label: "parley", destination: LogDestination(handler: memory, level: level)), memory)
}

/// The admin token the operations tests configure.
let adminToken = "admin-token-0123456789abcdef"
let metricsToken = "metrics-token-0123456789abcdef"

/// One HTTP/1.1 request with `Connection: close`, with a bearer token and a JSON body when
/// given; returns the status and the body.
func operationsRequest(_ server: ParleyServer, _ method: String, _ target: String, token: String? = nil,
                       body: String? = nil) async throws -> HTTPTestResponse {
    try await httpRequest(port: server.httpPort, method, target, json: body ?? "",
                          headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
}

/// The admin API's JSON answer (status 200 expected unless told).
func admin(_ server: ParleyServer, _ method: String, _ path: String, body: String? = nil,
           expect status: Int = 200) async throws -> JSONValue {
    let response = try await operationsRequest(server, method, "/admin/api" + path, token: adminToken, body: body)
    guard response.status == status else {
        throw TestSocket.Failure("\(method) \(path): \(response.status) \(response.body), expected \(status)")
    }
    return try JSONParser.parse(response.body)
}

/// The value of one sample of a Prometheus text (`name` or `name{labels}`, exactly).
func metric(_ text: String, _ sample: String) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(sample + " ") {
        return Double(line.dropFirst(sample.count + 1))
    }
    return nil
}

extension TestSocket {
    /// Lines until one satisfies `predicate` (at most `timeout` seconds); returns it.
    func nextLine(timeout: Double = 5, until predicate: (String) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let line = try await nextLine(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if predicate(line) { return line }
        }
    }
}
