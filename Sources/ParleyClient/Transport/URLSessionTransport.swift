#if canImport(Darwin)
import Foundation

/// The default transport on Apple platforms: `URLSessionWebSocketTask` (TLS included).
/// Thin by design: everything Parley-specific lives in ``ParleyClient``.
public struct URLSessionTransport: ParleyTransport {
    private let session: URLSession

    /// Uses `URLSession.shared` unless told otherwise.
    public init(session: URLSession = .shared) { self.session = session }

    /// Opens a connection; see ``ParleyTransport/open(_:onEvent:)``.
    public func open(_ endpoint: ParleyEndpoint,
                     onEvent: @escaping @Sendable (TransportEvent) -> Void) async throws(ParleyClientError) -> any ParleyTransportConnection {
        var components = URLComponents(url: endpoint.url, resolvingAgainstBaseURL: false)
        if components?.scheme == "http" { components?.scheme = "ws" }
        if components?.scheme == "https" { components?.scheme = "wss" }
        guard let url = components?.url else { throw ParleyClientError(.invalidURL, endpoint.url.absoluteString) }
        let task = session.webSocketTask(with: url)
        task.resume()
        // The first receive doubles as "the upgrade finished": a ping round trip would too,
        // but Parley may not send anything before the handshake, so send a ping instead.
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                task.sendPing { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } catch {
            task.cancel(with: .abnormalClosure, reason: nil)
            throw ParleyClientError(.connectionFailed, error.localizedDescription)
        }
        let connection = URLSessionConnection(task: task)
        connection.receiveLoop(onEvent)
        return connection
    }
}

/// `URLSessionWebSocketTask` is documented thread-safe, so this wrapper is Sendable as is.
final class URLSessionConnection: ParleyTransportConnection, Sendable {
    private let task: URLSessionWebSocketTask

    init(task: URLSessionWebSocketTask) { self.task = task }

    func receiveLoop(_ onEvent: @escaping @Sendable (TransportEvent) -> Void) {
        task.receive { [task] result in
            switch result {
            case .success(.string(let text)):
                onEvent(.text(text))
                self.receiveLoop(onEvent)
            case .success(.data(let data)):
                onEvent(.text(String(decoding: data, as: UTF8.self)))
                self.receiveLoop(onEvent)
            case .success:
                self.receiveLoop(onEvent)
            case .failure:
                let code = task.closeCode == .invalid ? 1006 : UInt16(task.closeCode.rawValue)
                let reason = task.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
                onEvent(.closed(code: code, reason: reason))
            }
        }
    }

    func send(_ text: String) {
        task.send(.string(text)) { _ in }
    }

    func close(code: UInt16, reason: String) {
        task.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .normalClosure,
                    reason: Data(reason.utf8))
    }
}
#endif
