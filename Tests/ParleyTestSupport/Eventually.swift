import Foundation

/// A wait that ran out: names what was awaited and for how long.
public struct TimeoutError: Error, CustomStringConvertible {
    public let what: String
    public let seconds: Double
    public init(what: String, seconds: Double) {
        self.what = what
        self.seconds = seconds
    }
    public var description: String { "\(what) did not happen within \(seconds) s" }
}

/// Waits until `condition` holds, checking it every few milliseconds, and throws
/// ``TimeoutError`` naming `what` when `timeout` seconds pass first. This replaces "sleep, then
/// assert": on a busy machine the wait lasts as long as the system needs, and no longer.
/// Never holds a thread of the cooperative pool while it waits; `condition` runs in the
/// caller's isolation (on its actor, e.g. the main actor), so it may touch what the caller can.
public func eventually(_ what: String, timeout: Double = 5, pollMillis: Int = 5,
                       isolation: isolated (any Actor)? = #isolation,
                       _ condition: () async throws -> Bool) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while try await !condition() {
        guard Date() < deadline else { throw TimeoutError(what: what, seconds: timeout) }
        try await Task.sleep(for: .milliseconds(pollMillis))
    }
}

/// The blocking form of `eventually`, for synchronous tests and threads of their own.
public func eventuallyBlocking(_ what: String, timeout: Double = 5, pollMillis: Int = 5,
                               _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while try !condition() {
        guard Date() < deadline else { throw TimeoutError(what: what, seconds: timeout) }
        Thread.sleep(forTimeInterval: Double(pollMillis) / 1000)
    }
}
