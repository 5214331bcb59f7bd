import Foundation
import Testing
@testable import ParleyIO
import ParleyTestSupport

@Suite struct TLSTests {
    final class Collector: ConnectionHandler {
        let done: CheckedContinuation<String, Never>
        var received: [UInt8] = []
        var finished = false
        init(_ done: CheckedContinuation<String, Never>) { self.done = done }
        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            // Bytes, not per-read strings: a read may end inside a UTF-8 sequence.
            received += bytes
            if received.last == 10, !finished {
                finished = true
                done.resume(returning: String(decoding: received, as: UTF8.self))
                connection.close()
            }
        }
        func connectionDidClose(_ connection: TCPConnection, reason: ConnectionCloseReason) {
            if !finished { finished = true; done.resume(returning: "closed: \(reason)") }
        }
    }

    /// Starts a TLS echo server with `server`, connects one client using `client`, sends `text`,
    /// and returns what came back (or "closed: …" when the connection ended first).
    func exchange(server: TLSContext, client: TLSContext, text: String, loops: Int) async throws -> String {
        let group = EventLoopGroup(loopCount: loops)
        defer { group.shutdown() }
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            try? connection.startTLS(server)
            connection.handler = EchoHandler()
        }
        defer { listener.close() }
        let port = listener.port
        let loop = group.loops[0]
        return await withCheckedContinuation { (done: CheckedContinuation<String, Never>) in
            loop.execute {
                loop.connect(host: "127.0.0.1", port: port) { result in
                    guard case .success(let connection) = result else { done.resume(returning: "connect failed"); return }
                    do { try connection.startTLS(client, serverName: "localhost") } catch { done.resume(returning: "\(error)"); return }
                    connection.handler = Collector(done)
                    connection.write(text)
                }
            }
        }
    }

    @Test func echoOverTLSRoundTrips() async throws {
        let (cert, key) = try makeTestCertificate()
        let server = try TLSContext(certificateChainFile: cert, privateKeyFile: key)
        let client = try TLSContext(clientTrusting: cert)
        let big = String(repeating: "é", count: 50_000)
        let echoed = try await exchange(server: server, client: client, text: "secret \(big) 👋\n", loops: 2)
        let intact = echoed == "secret \(big) 👋\n"
        #expect(intact, "got \(echoed.count) characters: \(echoed.prefix(80))")
    }

    @Test func clientRefusesAnUntrustedCertificate() async throws {
        let (cert, key) = try makeTestCertificate()
        let (otherCert, _) = try makeTestCertificate()
        let server = try TLSContext(certificateChainFile: cert, privateKeyFile: key)
        let client = try TLSContext(clientTrusting: otherCert)
        let outcome = try await exchange(server: server, client: client, text: "hello\n", loops: 1)
        #expect(outcome.hasPrefix("closed: error"))
    }

    @Test func badCertificatePathsAreClearErrors() {
        #expect(throws: IOError.self) { try TLSContext(certificateChainFile: "/nonexistent/cert.pem", privateKeyFile: "/nonexistent/key.pem") }
    }

    @Test func plainClientAgainstTLSServerDoesNotDisturbIt() async throws {
        let (cert, key) = try makeTestCertificate()
        let server = try TLSContext(certificateChainFile: cert, privateKeyFile: key)
        let group = EventLoopGroup(loopCount: 1)
        defer { group.shutdown() }
        let listener = try TCPListener.bind(host: "127.0.0.1", port: 0, group: group) { connection in
            try? connection.startTLS(server)
            connection.handler = EchoHandler()
        }
        defer { listener.close() }
        let plain = try TestSocket(port: listener.port)
        try plain.send("GET / HTTP/1.1\r\n\r\n")
        #expect(plain.waitForClose(timeout: 5))
    }
}
