import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The abuse limits of README.md, "Limits", each breached for real against a server.
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

    @Test func lineFloodGetsErrorsThenDisconnect() async throws {
        let server = try startTestServer { $0.lineRatePerSecond = 5; $0.lineBurst = 10 }
        defer { server.shutdown() }
        let socket = try TestSocket(port: server.linePort)
        try socket.send("iam:flood\n")
        _ = try await socket.nextLine()
        try socket.send(String(repeating: "msg:spam\n", count: 200))
        var sawError = false, sawDisconnect = false
        while let line = try? await socket.nextLine(timeout: 3) {
            if line.hasPrefix("error: rate limit exceeded (") { sawError = true }
            if line == "error: rate limit exceeded again and again; disconnected" { sawDisconnect = true }
        }
        #expect(sawError)
        #expect(sawDisconnect)
        #expect(await socket.closed(within: 2))
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

    @Test func maxConnectionsRefusesWithAReasonOnEachDoor() async throws {
        let server = try startTestServer { $0.maxConnections = 2 }
        defer { server.shutdown() }
        let a = try TestSocket(port: server.linePort)
        let b = try TestSocket(port: server.linePort)
        try a.send("iam:a\n"); try b.send("iam:b\n")
        _ = try await a.nextLine(); _ = try await b.nextLine()
        let refused = try TestSocket(port: server.linePort)
        #expect(try await refused.nextLine() == "error: server is full (limit 2 connections); try again later")
        #expect(await refused.closed(within: 2))
        let http = try await httpRequest(port: server.httpPort, "GET", "/demo/stats")
        #expect(http.status == 503)
        #expect(http.body.contains("server is full"))
        a.abort(); b.abort()
        // Once both are released, /metrics itself is let in (while full it would be refused too).
        try await eventually("a and b released") { server.openConnectionCount == 0 }
        #expect(try await Self.breaches(server, "max_connections") == 2)
    }

    @Test func connectionsPerIPAreLimited() async throws {
        let server = try startTestServer { $0.maxConnectionsPerIP = 2 }
        defer { server.shutdown() }
        let a = try await NativeClient.connect(server)
        let b = try TestSocket(port: server.linePort)
        try b.send("iam:b\n")
        _ = try await b.nextLine()
        let refused = try TestSocket(port: server.linePort)
        #expect(try await refused.nextLine() == "error: too many connections from your address (limit 2)")
        let http = try await httpRequest(port: server.httpPort, "GET", "/demo/stats")
        #expect(http.status == 503)
        #expect(http.body == "too many connections from your address (limit 2)\n")
        // A slot freed is a slot available.
        b.abort()
        try await eventually("b released") { server.openConnectionCount == 1 }
        #expect(try await Self.breaches(server, "max_connections_per_ip") == 2)
        _ = a
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

    @Test func observableMembersListIsCutWithTheRealCount() async throws {
        let server = try startTestServer { $0.maxMembersListed = 2 }
        defer { server.shutdown() }
        var clients: [NativeClient] = []
        for _ in 0..<3 {
            let client = try await NativeClient.connect(server)
            _ = try await client.subscribe("observable-big")
            clients.append(client)
        }
        let late = try await NativeClient.connect(server)
        _ = try await late.subscribe("observable-big")
        let members = try await late.next { $0["type"] == "observable_members" }
        #expect(members["data"]?.arrayValue?.count == 2)
        #expect(members["count"] == 4)
        // Under the limit there is no count.
        let small = try await NativeClient.connect(server)
        _ = try await small.subscribe("observable-small")
        let few = try await small.next { $0["type"] == "observable_members" }
        #expect(few["data"]?.arrayValue?.count == 1)
        #expect(few["count"] == nil)
        #expect(try await Self.breaches(server, "members_listed") == 2)  // the third joiner and the late one
    }

    @Test func restRateIsLimitedPerAddressWith429() async throws {
        let server = try startTestServer { $0.restRatePerSecond = 1; $0.restBurst = 2 }
        defer { server.shutdown() }
        #expect(try await httpRequest(port: server.httpPort, "GET", "/demo/stats").status == 200)
        #expect(try await httpRequest(port: server.httpPort, "GET", "/demo/stats").status == 200)
        let socket = try TestSocket(port: server.httpPort)
        try socket.send("GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        _ = await socket.closed(within: 3)
        let text = String(decoding: socket.buffered, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 429"))
        #expect(text.contains("Retry-After: 1\r\n"))
        #expect(text.hasSuffix("too many requests (limit 1 per second per address); slow down\n"))
        // What is awaited here is time itself: the bucket refills at 1 per second. Waiting as
        // long as Retry-After says (plus a margin) cannot be too short on a busy machine, and
        // a request made while still refused would count as a second breach.
        try await Task.sleep(for: .milliseconds(1100))
        #expect(try await httpRequest(port: server.httpPort, "GET", "/demo/stats").status == 200)
        #expect(try await Self.breaches(server, "rest_rate") == 1)
    }

    @Test func metricsListEveryLimitAndOpenConnections() async throws {
        let server = try startTestServer { $0.webSocketMaxMessageSize = 1024; $0.nativeMaxRooms = 1 }
        defer { server.shutdown() }
        let client = try await NativeClient.connect(server)
        _ = try await client.subscribe("a")
        #expect(try await client.subscribe("b")["error"] != nil)
        let big = try await NativeClient.connect(server)
        try big.publish(.string(String(repeating: "x", count: 2_000)), to: "a")
        #expect(try await big.ws.closeCode() == 1009)
        try await eventually("big released") { server.openConnectionCount == 1 }
        let metrics = try await httpRequest(port: server.httpPort, "GET", "/metrics")
        #expect(metrics.status == 200)
        for name in ["max_connections", "max_connections_per_ip", "handshake_timeout", "idle_timeout", "message_size",
                     "message_rate", "rate_abuse_disconnect", "rooms_per_connection", "members_listed", "rest_rate"] {
            #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"\(name)\"} "), "\(name) missing")
        }
        #expect(metrics.body.contains("parley_open_connections 2\n"))  // `client` and the /metrics request
        #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"rooms_per_connection\"} 1\n"))
        #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"message_size\"} 1\n"))
    }

    @Test func limitFlagsParse() throws {
        let configuration = try #require(try ServerConfiguration.parse(arguments: [
            "--max-connections", "5", "--max-connections-per-ip", "3", "--handshake-timeout", "0.5",
            "--idle-timeout", "60", "--max-members-listed", "10", "--rest-rate", "7", "--max-body-size", "2048",
            "--socketio-max-payload", "4096", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--line-tls",
        ], environment: ["PARLEY_IDLE_TIMEOUT": "30"]))
        #expect(configuration.maxConnections == 5)
        #expect(configuration.maxConnectionsPerIP == 3)
        #expect(configuration.handshakeTimeoutMillis == 500)
        #expect(configuration.idleTimeoutMillis == 60_000)
        #expect(configuration.maxMembersListed == 10)
        #expect(configuration.restRatePerSecond == 7 && configuration.restBurst == 14)
        #expect(configuration.httpMaxBodyBytes == 2048)
        #expect(configuration.socketIOMaxPayload == 4096)
        #expect(configuration.tlsCertificateFile == "c.pem" && configuration.tlsKeyFile == "k.pem")
        #expect(configuration.lineTLS)
        let defaults = ServerConfiguration()
        #expect(defaults.maxConnections == 10_000 && defaults.maxConnectionsPerIP == 1_000)
        #expect(defaults.handshakeTimeoutMillis == 10_000 && defaults.idleTimeoutMillis == 300_000)
        #expect(defaults.maxMembersListed == 1_000 && defaults.restRatePerSecond == 20 && defaults.restBurst == 40)
        #expect(!defaults.lineTLS && defaults.tlsCertificateFile == nil)
    }
}

/// Startup with bad TLS files stops with a message naming the file.
@Suite struct TLSStartupTests {
    static func startupError(_ adjust: (inout ServerConfiguration) -> Void) -> String? {
        do {
            let server = try startTestServer(adjust)
            server.shutdown()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func missingFilesAndMismatchedPairsStopStartup() throws {
        let one = try makeTestCertificate(), two = try makeTestCertificate()
        let missing = Self.startupError { $0.tlsCertificateFile = "/nonexistent/cert.pem"; $0.tlsKeyFile = one.key }
        #expect(missing == "cannot read the TLS certificate file /nonexistent/cert.pem: No such file or directory")
        let mismatched = Self.startupError { $0.tlsCertificateFile = one.cert; $0.tlsKeyFile = two.key }
        // OpenSSL notices the mismatch while loading the key: "key values mismatch".
        #expect(mismatched?.contains("TLS private key \(two.key)") == true, "\(mismatched ?? "started")")
        #expect(mismatched?.contains("mismatch") == true, "\(mismatched ?? "started")")
        let notPEM = Self.startupError { $0.tlsCertificateFile = one.key; $0.tlsKeyFile = one.key }
        #expect(notPEM?.contains("cannot load TLS certificate \(one.key)") == true, "\(notPEM ?? "started")")
        let halfConfigured = Self.startupError { $0.tlsCertificateFile = one.cert }
        #expect(halfConfigured == "--tls-cert needs --tls-key (the certificate's private key)")
        let lineOnly = Self.startupError { $0.lineTLS = true }
        #expect(lineOnly == "--line-tls needs --tls-cert and --tls-key")
        #expect(Self.startupError { $0.tlsCertificateFile = one.cert; $0.tlsKeyFile = one.key } == nil)
    }
}
