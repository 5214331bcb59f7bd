import Foundation
import ParleyCore
import ParleyIO
import ParleyServer
import ParleyTestSupport
import Testing

/// The line door in-process: its grammar, wording, limits and rate, over in-memory
/// connections (Tests/EndToEndTests/LineDoorTests keeps what needs real sockets).
@Suite struct LineDoorInProcessTests {
    @Test func threeClientsSeeEachOtherJoinAndEveryMessageIncludingTheirOwn() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.lineClient(name: "alice")
        let bob = try await server.lineClient(name: "bob")
        #expect(try await alice.readLine() == "bob has joined")
        let carol = try await server.lineClient(name: "carol")
        #expect(try await alice.readLine() == "carol has joined")
        #expect(try await bob.readLine() == "carol has joined")

        bob.send("msg:hello everyone\n")
        for client in [alice, bob, carol] { #expect(try await client.readLine() == "bob:hello everyone") }
        bob.closeWrite()
        #expect(try await alice.readLine() == "bob has left")
        #expect(try await bob.waitForClose() == .peerClosed)
    }

    @Test func unframedWritesOfTheOriginalIOSClientAreUnderstood() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let watcher = try await server.lineClient(name: "watcher")
        let luke = try await server.line()
        luke.send("iam:Luke")              // no newline, as the iOS client writes it
        #expect(try await luke.readLine() == "Luke has joined")
        #expect(try await watcher.readLine() == "Luke has joined")
        luke.send("msg:Hey")
        #expect(try await luke.readLine() == "Luke:Hey")
        #expect(try await watcher.readLine() == "Luke:Hey")
    }

    @Test func unicodeAndColonsArriveIntact() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let a = try await server.lineClient(name: "zoë")
        let b = try await server.lineClient(name: "bob")
        _ = try await a.readLine()
        a.send("msg:héllo 👋\n")
        a.send("msg:a:b:c\r\n")
        for client in [a, b] {
            #expect(try await client.readLine() == "zoë:héllo 👋")
            #expect(try await client.readLine() == "zoë:a:b:c")
        }
    }

    @Test func aLineSplitAcrossReadsIsOneMessage() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let peer = try await server.lineClient(name: "drip")
        for byte in Array("msg:one byte at a time\n".utf8) { peer.send([byte]) }
        #expect(try await peer.readLine() == "drip:one byte at a time")
    }

    @Test func errorsForUnknownAndOutOfOrderCommands() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let peer = try await server.line()
        peer.send("msg:too early\n")
        #expect(try await peer.readLine().hasPrefix("error: say who you are first"))
        peer.send("hello?\n")
        #expect(try await peer.readLine().hasPrefix("error: unknown command"))
        peer.send("iam:\n")
        #expect(try await peer.readLine().hasPrefix("error: iam needs a name"))
        peer.send("iam:dan\n")
        #expect(try await peer.readLine() == "dan has joined")
        peer.send("iam:dan2\n")
        #expect(try await peer.readLine() == "error: already joined as dan")
        peer.send("msg:still here\n")
        #expect(try await peer.readLine() == "dan:still here")
    }

    @Test func overlongLineIsRejectedAndTheConnectionLivesOn() async throws {
        let server = try InProcessServer { $0.lineMaxLength = 1024 }
        defer { server.stop() }
        let peer = try await server.lineClient(name: "eve")
        peer.send("msg:" + String(repeating: "x", count: 5000) + "\n")
        #expect(try await peer.readLine().hasPrefix("error: line too long"))
        peer.send("msg:short\n")
        #expect(try await peer.readLine() == "eve:short")
    }

    @Test func rateLimitDropsTheExcessWithAnErrorAndRefillsWithTime() async throws {
        let server = try InProcessServer { $0.lineRatePerSecond = 5; $0.lineBurst = 5 }
        defer { server.stop() }
        let peer = try await server.lineClient(name: "flood")
        func burst(_ count: Int) async throws -> (delivered: Int, refused: Int) {
            peer.send(String(repeating: "msg:spam\n", count: count))
            var delivered = 0, refused = 0
            for _ in 0..<count {
                let line = try await peer.readLine()
                if line == "flood:spam" { delivered += 1 } else if line.hasPrefix("error: rate limit exceeded") { refused += 1 }
            }
            return (delivered, refused)
        }
        let first = try await burst(20)
        #expect(first.delivered == 5 && first.refused == 15)
        // The clock stands still: the bucket stays empty.
        let still = try await burst(3)
        #expect(still.delivered == 0 && still.refused == 3)
        // A second later five more tokens are there, and no more.
        server.clock.advance(millis: 1000)
        let refilled = try await burst(8)
        #expect(refilled.delivered == 5 && refilled.refused == 3)
    }

    @Test func garbageAndAbruptDisconnectsDoNotDisturbOthers() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.lineClient(name: "alice")
        let bob = try await server.lineClient(name: "bob")
        _ = try await alice.readLine()   // bob has joined
        let flooder = try await server.lineClient(name: "flooder")
        let junk = try await server.lineClient(name: "junk")
        let quitter = try await server.lineClient(name: "quitter")
        for client in [alice, bob] {
            for name in ["flooder", "junk", "quitter"] { #expect(try await client.readLine() == "\(name) has joined") }
        }
        // 1 MiB without a newline.
        flooder.send([UInt8](repeating: UInt8(ascii: "g"), count: 1 << 20))
        // Binary junk with NULs and invalid UTF-8.
        var generator = SystemRandomNumberGenerator()
        junk.send((0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) })
        quitter.reset()

        #expect(try await alice.readLine(until: { $0 == "quitter has left" }) == "quitter has left")
        alice.send("msg:still chatting\n")
        #expect(try await bob.readLine(until: { $0.hasPrefix("alice:") }) == "alice:still chatting")
        #expect(try await alice.readLine(until: { $0.hasPrefix("alice:") }) == "alice:still chatting")
        #expect(try await flooder.readLine(until: { $0.hasPrefix("error:") }).hasPrefix("error: line too long"))
    }

    @Test func aReaderThatNeverReadsIsCutOffAtTheQueueLimitWhileOthersGetEverything() async throws {
        let server = try InProcessServer {
            $0.lineRatePerSecond = 1_000_000; $0.lineBurst = 1_000_000
            $0.writeQueueLimit = 64 * 1024
        }
        defer { server.stop() }
        let stuck = try await server.lineClient(name: "stuck")
        stuck.stopReading()
        let sender = try await server.lineClient(name: "sender")
        let reader = try await server.lineClient(name: "reader")
        _ = try await sender.readLine()   // reader has joined
        let text = String(repeating: "z", count: 1000)
        // 200 kB in batches of 20 kB the two readers take as they come; `stuck` reads nothing.
        var others: [String] = []
        for _ in 0..<10 {
            for _ in 0..<20 { sender.send("msg:\(text)\n") }
            for client in [sender, reader] {
                var got = 0
                while got < 20 {
                    let line = try await client.readLine()
                    if line.hasPrefix("sender:") { got += 1 } else { others.append(line) }
                }
            }
        }
        #expect(try await stuck.waitForClose() == .writeQueueOverflow)
        if others.count < 2 { others.append(try await sender.readLine()) }
        if others.count < 2 { others.append(try await reader.readLine()) }
        #expect(others == ["stuck has left", "stuck has left"])
    }

    @Test func joinHistoryComesBeforeTheOwnJoin() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        let alice = try await server.lineClient(name: "alice")
        for text in ["one", "two"] {
            alice.send("msg:\(text)\n")
            #expect(try await alice.readLine() == "alice:\(text)")
        }
        let late = try await server.line()
        late.send("iam:late\n")
        #expect(try await late.readLine() == "alice:one")
        #expect(try await late.readLine() == "alice:two")
        #expect(try await late.readLine() == "late has joined")
    }

    @Test func gracefulStopSaysGoodbye() async throws {
        let server = try InProcessServer()
        let peer = try await server.lineClient(name: "neo")
        server.stop()
        #expect(try await peer.readLine() == "server is shutting down, bye")
        try await peer.waitForClose()
    }

    @Test func perIPLimitAndBansApplyToInMemoryConnections() async throws {
        let server = try InProcessServer { $0.maxConnectionsPerIP = 1 }
        defer { server.stop() }
        _ = try await server.lineClient(name: "first", ip: "10.0.0.7")
        let second = try await server.line(ip: "10.0.0.7")
        #expect(try await second.readLine().hasPrefix("error: "))
        try await second.waitForClose()
        // Another address is let in.
        _ = try await server.lineClient(name: "other", ip: "10.0.0.8")
    }

    @Test func badFlagsAreRefusedWithAMessage() throws {
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--line-port", "70000"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--nope"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: ["--lobby", "noslash"], environment: [:]) }
        #expect(throws: ServerConfiguration.UsageError.self) { try ServerConfiguration.parse(arguments: [], environment: ["PARLEY_LOOPS": "zero"]) }
        let parsed = try ServerConfiguration.parse(arguments: ["--line-port=0", "--lobby", "acme/observable-general"], environment: ["PARLEY_HOST": "0.0.0.0", "PARLEY_LINE_PORT": "9"])
        #expect(parsed?.linePort == 0)
        #expect(parsed?.host == "0.0.0.0")
        #expect(parsed?.lobby == RoomKey(channel: "acme", room: "observable-general"))
        #expect(try ServerConfiguration.parse(arguments: ["--help"], environment: [:]) == nil)
        #expect(ServerConfiguration.usage.contains("--line-port"))
    }

    @Test func aServerWithoutListenersBindsNoPort() async throws {
        let server = try InProcessServer()
        defer { server.stop() }
        #expect(server.server.linePort == 0 && server.server.httpPort == 0)
    }
}
