import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The abuse limits of README.md, "Limits", that need real sockets or wall-clock timers,
/// breached for real against a server; the others are tested in-process
/// (Tests/ParleyServerTests/LimitsInProcessTests).
@Suite(.serialized) struct AbuseLimitsTests {
    /// `parley_limit_breaches_total{limit="NAME"}` as `/metrics` shows it, read in process:
    /// an unprotected `/metrics` counts against the REST rate limit, which some of these
    /// tests exhaust on purpose (`metricsListEveryLimitAndOpenConnections` reads it over HTTP).
    static func breaches(_ server: ParleyServer, _ limit: String) async throws -> Int {
        let metrics = server.metricsText()
        let prefix = "parley_limit_breaches_total{limit=\"\(limit)\"} "
        guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else {
            throw TestSocket.Failure("no \(limit) in /metrics: \(metrics)")
        }
        return Int(line.dropFirst(prefix.count)) ?? -1
    }

    @Test func floodIsRefusedThenDisconnectedWhileOthersChatOnTime() async throws {
        let server = try startTestServer {
            $0.nativeRatePerSecond = 20; $0.nativeBurst = 40
            // More than 1,000 refusals within 10 s: disconnected, about a second into a flood
            // of ~1,000 messages a second, so the flood overlaps the talker's messages.
            $0.rateAbuseFactor = 50
        }
        defer { server.shutdown() }
        let listener = try await NativeClient.connect(server)
        _ = try await listener.subscribe("r")
        // The flood, from its own thread: publishes in bursts of 10 every 10 ms until the
        // server closes, then read what came back.
        let flood = BackgroundThread { () -> (errors: Int, closeCode: UInt16?, seconds: Double) in
            guard let flooder = try? NativeClient.connect(server) as NativeClient else { return (-1, nil, 0) }
            let started = Date()
            for n in 1...20_000 {
                do {
                    try flooder.send(["type": "publish", "room": "r", "message": "spam", "callback": .number(JSONNumber(n))])
                } catch { break }  // closed by the server mid-flood
                if n % 10 == 0 { Thread.sleep(forTimeInterval: 0.01) }
            }
            let seconds = Date().timeIntervalSince(started)
            var errors = 0
            while let text = try? flooder.ws.receiveText(timeout: 3) {
                if text.contains("rate limit exceeded") { errors += 1 }
            }
            return (errors, try? flooder.ws.waitForClose(timeout: 3), seconds)
        }

        // Meanwhile the talker's messages reach the listener promptly. Measured on a thread of
        // its own, so a busy test pool cannot add its own delays to the figure.
        let chat = BackgroundThread { () -> Double in
            guard let listener = try? NativeClient.connect(server) as NativeClient,
                  (try? listener.subscribe("r") as JSONValue) != nil,
                  let talker = try? NativeClient.connect(server) as NativeClient else { return .infinity }
            var worst = 0.0
            for n in 0..<10 {
                let sent = Date()
                do {
                    try talker.publish(.string("hello \(n)"), to: "r")
                    _ = try listener.next(timeout: 5) { $0["message"]?.stringValue == "hello \(n)" } as JSONValue
                } catch { return .infinity }
                worst = max(worst, Date().timeIntervalSince(sent))
                Thread.sleep(forTimeInterval: 0.1)
            }
            return worst
        }
        let worst = try chat.result(timeout: 60)
        #expect(worst < 0.5, "the talker's worst latency was \(worst) s during the flood")

        let (errors, closeCode, floodSeconds) = try flood.result(timeout: 60)
        #expect(floodSeconds > 0.5, "the flood lasted \(floodSeconds) s, less than the talker's messages")
        #expect(errors > 0)
        #expect(closeCode == 1008)
        #expect(try await Self.breaches(server, "message_rate") > 1_000)
        #expect(try await Self.breaches(server, "rate_abuse_disconnect") == 1)
    }

    /// A client still sending when the server closes for abuse gets the 1008 all the same. The
    /// server reads (and drops) what comes after its close frame, until the client's close frame
    /// (or 2 s): closing at once reset the connection under a client still writing, and a
    /// browser whose write fails with a reset reports 1006, never the 1008.
    @Test func aFlooderThatIsStillSendingReadsItsCloseCode() throws {
        let server = try startTestServer {
            $0.nativeRatePerSecond = 20; $0.nativeBurst = 40
            $0.rateAbuseFactor = 5  // 100 refusals within the window: disconnected
        }
        defer { server.shutdown() }
        for attempt in 1...3 {
            let flooder = try NativeClient.connect(server)
            // Publishes for half a second, 20 every millisecond, nothing read meanwhile: they
            // go on arriving after the server decided to close (as a browser's flood does).
            var sent = 0
            var sendFailure: String?
            let until = Date().addingTimeInterval(0.5)
            flood: while Date() < until {
                for _ in 0..<20 {
                    sent += 1
                    do {
                        try flooder.send(["type": "publish", "room": "r", "message": .string("spam \(sent)"), "callback": .number(JSONNumber(sent))])
                    } catch {
                        sendFailure = "\(error)"  // reset by the server
                        break flood
                    }
                }
                Thread.sleep(forTimeInterval: 0.001)
            }
            // The server waits for our close frame (up to 2 s), so the flood was never cut off.
            #expect(sendFailure == nil, "attempt \(attempt): sending failed after \(sent) publishes: \(sendFailure ?? "")")
            let code = try? flooder.ws.waitForClose(timeout: 5)
            #expect(code == 1008, "attempt \(attempt): sent \(sent), close code \(code.map { String(describing: $0) } ?? "none")")
            // Then a clean end (FIN), not a reset: a browser that is still sending when a reset
            // comes fails the socket with 1006 and never shows the 1008.
            var ending = "EOF"
            do {
                if try !flooder.ws.readToEnd(timeout: 5) { ending = "no EOF within 5 s" }
            } catch { ending = "\(error)" }
            #expect(ending == "EOF", "attempt \(attempt): the connection ended with \(ending)")
        }
    }

    @Test func halfOpenConnectionsDoNotStopNewClientsAndTimeOut() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < 8_000 {
            limit.rlim_cur = min(limit.rlim_max, 8_000)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let server = try startTestServer {
            $0.handshakeTimeoutMillis = 3_000
            $0.maxConnectionsPerIP = 10_000
        }
        defer { server.shutdown() }
        let httpPort = server.httpPort, linePort = server.linePort
        // 2,000 connections that connect and never send, half per door, from a plain thread.
        let opened = BackgroundThread { () -> [Int32] in
            var fds: [Int32] = []
            for n in 0..<2_000 {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = UInt16(n % 2 == 0 ? httpPort : linePort).bigEndian
                inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
                let result = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                if result == 0 { fds.append(fd) } else { close(fd) }
            }
            return fds
        }
        let fds = try opened.result(timeout: 30)
        defer { for fd in fds { close(fd) } }
        #expect(fds.count == 2_000)
        let started = Date()

        // New clients connect and chat while the half-open ones sit there.
        let alice = try await NativeClient.connect(server)
        _ = try await alice.subscribe("r")
        let bob = try await NativeClient.connect(server)
        try bob.publish("hi alice", to: "r")
        #expect(try await alice.next { $0["message"] == "hi alice" }["message"] == "hi alice")
        let carol = try TestSocket(port: server.linePort)
        try carol.send("iam:carol\n")
        #expect(try await carol.nextLine() == "carol has joined")
        #expect(Date().timeIntervalSince(started) < 2.5, "the new clients were served before the timeout")

        // Then every one of them is closed by the handshake timeout.
        let closedAll = BackgroundThread { () -> Int in
            var closed = Set<Int32>()
            let deadline = Date().addingTimeInterval(15)
            var buffer = [UInt8](repeating: 0, count: 512)
            while closed.count < fds.count && Date() < deadline {
                var polls = fds.filter { !closed.contains($0) }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                _ = poll(&polls, nfds_t(polls.count), 200)
                for p in polls where p.revents != 0 {
                    let n = recv(p.fd, &buffer, buffer.count, 0)
                    if n <= 0 { closed.insert(p.fd) }  // EOF (after the line door's goodbye)
                }
            }
            return closed.count
        }
        #expect(try closedAll.result(timeout: 30) == 2_000)
        #expect(Date().timeIntervalSince(started) >= 2.5)
        #expect(try await Self.breaches(server, "handshake_timeout") >= 2_000)
        // The chatting clients were not touched.
        try bob.publish("still here", to: "r")
        #expect(try await alice.next { $0["message"] == "still here" }["message"] == "still here")
    }

    @Test func handshakeTimeoutClosesSilentLineAndHTTPConnections() async throws {
        let server = try startTestServer { $0.handshakeTimeoutMillis = 300 }
        defer { server.shutdown() }
        // One who identifies in time stays: connected first, so its timer (were it left
        // running) would fire before any of the silent ones' below.
        let quick = try TestSocket(port: server.linePort)
        try quick.send("iam:quick\n")
        #expect(try await quick.nextLine() == "quick has joined")
        let line = try TestSocket(port: server.linePort)
        #expect(try await line.nextLine(timeout: 3) == "error: no iam:NAME within 0.3 s; bye")
        #expect(await line.closed(within: 2))
        let silent = try TestSocket(port: server.httpPort)
        #expect(await silent.closed(within: 3))
        let loris = try TestSocket(port: server.httpPort)
        try loris.send("GET /v3/websocket HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        #expect(await loris.closed(within: 3))
        #expect(String(decoding: loris.buffered, as: UTF8.self).hasPrefix("HTTP/1.1 408"))
        // The silent ones were closed after quick's timer would have fired: quick still chats,
        // and its own message is the next thing it gets (no goodbye came before it).
        try quick.send("msg:still here\n")
        #expect(try await quick.nextLine() == "quick:still here")
        #expect(try await Self.breaches(server, "handshake_timeout") == 3)
    }

    @Test func idleConnectionsAreClosedWithAGoodbye() async throws {
        let server = try startTestServer { $0.idleTimeoutMillis = 500 }
        defer { server.shutdown() }
        let native = try await NativeClient.connect(server)
        let line = try TestSocket(port: server.linePort)
        try line.send("iam:sleepy\n")
        #expect(try await line.nextLine() == "sleepy has joined")
        #expect(try await native.ws.closeCode(timeout: 3) == 1001)
        #expect(try await line.nextLine(timeout: 3) == "idle timeout: nothing received for 0.5 s, bye")
        #expect(await line.closed(within: 2))
        #expect(try await Self.breaches(server, "idle_timeout") == 2)
    }

    @Test func idleSocketIOSessionIsClosed() throws {
        let server = try startTestServer { $0.idleTimeoutMillis = 500 }
        defer { server.shutdown() }
        let client = try PollingClient.open(port: server.httpPort, version: 4)
        try client.post(["40"])
        _ = try client.poll(until: { $0.hasPrefix("40") })
        // Nothing sent: the next poll is answered with the close packet.
        #expect(try client.poll(until: { $0 == "1" }, timeout: 3) == "1")
    }
}
