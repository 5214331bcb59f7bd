import Foundation
import ParleyCore
@testable import ParleyClient
import Synchronization
import Testing

@Suite struct EndpointTests {
    @Test func endpointParsing() throws {
        let endpoint = try ParleyEndpoint(url: URL(string: "ws://example.com:8080/v3/websocket?a=1")!)
        #expect(endpoint.host == "example.com")
        #expect(endpoint.port == 8080)
        #expect(endpoint.target == "/v3/websocket?a=1")
        #expect(endpoint.hostHeader == "example.com:8080")
        #expect(try ParleyEndpoint(url: URL(string: "wss://h/")!).isSecure)
        #expect(throws: ParleyClientError.self) { try ParleyEndpoint(url: URL(string: "ftp://h/")!) }
    }
}

@Suite(.serialized) struct LibUVTransportTests {
    @Test func talksToTheNativeDoor() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let (events, continuation) = AsyncStream.makeStream(of: TransportEvent.self)
        let connection = try await LibUVWebSocketTransport().open(try ParleyEndpoint(url: nativeURL(port: server.httpPort))) {
            continuation.yield($0)
        }
        connection.send(#"{"type":"handshake","channel":"demo","callback":3}"#)
        var iterator = events.makeAsyncIterator()
        let reply = try #require(await iterator.next())
        guard case .text(let text) = reply else { Issue.record("got \(reply)"); return }
        let json = try JSONParser.parse(text)
        #expect(json["callback"] == 3)
        #expect(json["client_id"]?.stringValue?.isEmpty == false)
        connection.close(code: 1000, reason: "bye")
        let last = await iterator.next()
        #expect(last == .closed(code: 1000, reason: ""))
    }

    @Test func refusedConnectionFailsWithATypedError() async throws {
        let transport = LibUVWebSocketTransport()
        // Port 1 on loopback: nothing listens there.
        do {
            _ = try await transport.open(try ParleyEndpoint(url: URL(string: "ws://127.0.0.1:1/")!)) { _ in }
            Issue.record("connected to port 1")
        } catch { #expect(error.code == .connectionFailed) }
        do {
            _ = try await transport.open(try ParleyEndpoint(url: URL(string: "wss://127.0.0.1:1/")!)) { _ in }
            Issue.record("wss opened")
        } catch {
            #expect(error.code == .connectionFailed)
        }
    }
}

@Suite(.serialized) struct KeepAliveTests {
    /// A server that stops answering (here: a proxy that swallows everything) is given up
    /// after two keep-alive intervals, reported as an abnormal close.
    @Test func silentServerIsDetected() async throws {
        let server = try startClientTestServer()
        defer { server.shutdown(timeout: .seconds(1)) }
        let proxy = try TCPProxy(upstreamPort: server.httpPort)
        defer { proxy.stop() }
        var transport = LibUVWebSocketTransport()
        transport.keepAliveInterval = .milliseconds(100)
        let (events, continuation) = AsyncStream.makeStream(of: TransportEvent.self)
        _ = try await transport.open(try ParleyEndpoint(url: nativeURL(port: proxy.port))) { continuation.yield($0) }
        proxy.counters.silent.store(true, ordering: .relaxed)
        let closed = try await within(3, "keep-alive close") {
            for await event in events { if case .closed(let code, _) = event { return code } }
            return UInt16(0)
        }
        #expect(closed == 1006)
    }
}
