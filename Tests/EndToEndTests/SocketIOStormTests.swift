import Foundation
#if canImport(Glibc)
import Glibc
#endif
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// Storms of joins: every `connectUser` makes every identified socket's user list change, so
/// the lists are paced per socket (SocketChatUserListPacer) and n joins cost each socket O(n)
/// bytes, not O(n²).
@Suite(.serialized) struct SocketIOStormTests {
    /// Reads every socket until `done` says it has what it needs, or one closes, or time runs out.
    static func drain(_ clients: [TestWebSocket], deadline: Date, onText: (Int, String) -> Void, done: () -> Bool) throws {
        var fds = clients.map { pollfd(fd: $0.socket.fd, events: Int16(POLLIN), revents: 0) }
        while !done() {
            guard Date() < deadline else { throw TimeoutError(what: "the storm settling", seconds: 0) }
            _ = fds.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), 100) }
            for index in fds.indices where fds[index].revents != 0 {
                fds[index].revents = 0
                while let text = try? clients[index].receiveText(timeout: 0.001) { onText(index, text) }
                if clients[index].isClosedForReading { throw TestSocket.Failure("socket \(index) was disconnected") }
            }
        }
    }

    @Test func aThousandConnectUserInOneBurstDisconnectNobodyAndEveryLastUserListIsComplete() throws {
        let n = 1_000
        let server = try startTestServer()   // default limits: 1,000 connections per IP, 4 MiB write queues
        defer { server.shutdown() }
        var clients: [TestWebSocket] = []
        for _ in 0..<n { clients.append(try socketIOClient(server)) }
        for (index, client) in clients.enumerated() { try client.sendText("42[\"connectUser\",\"u\(index)\"]") }
        // A complete list has every nickname, connected; its length tells it without parsing
        // (ids have a fixed length), and the last ones are parsed at the end.
        let entry = { (name: String) in "{\"id\":\"\(String(repeating: "x", count: 20))\",\"nickname\":\"\(name)\",\"isConnected\":true}" }
        let completeLength = "42[\"userList\",[]]".utf8.count + (0..<n).map { entry("u\($0)").utf8.count }.reduce(0, +) + (n - 1)
        var last = [String](repeating: "", count: n)
        var lists = [Int](repeating: 0, count: n)
        var complete = 0
        try Self.drain(clients, deadline: Date().addingTimeInterval(180), onText: { index, text in
            guard text.hasPrefix("42[\"userList\"") else { return }
            lists[index] += 1
            let wasComplete = last[index].utf8.count == completeLength
            last[index] = text
            let isComplete = text.utf8.count == completeLength
            if isComplete && !wasComplete { complete += 1 }
            if wasComplete && !isComplete { complete -= 1 }
        }, done: { complete == n })
        #expect(server.openConnectionCount == n, "nobody was disconnected")
        for index in [0, n / 2, n - 1] + (0..<20).map({ _ in Int.random(in: 0..<n) }) {
            let users = try #require(eventArguments(last[index], "userList")?.first?.arrayValue)
            #expect(users.count == n)
            #expect(Set(users.compactMap { $0["nickname"]?.stringValue }) == Set((0..<n).map { "u\($0)" }))
            #expect(users.allSatisfy { $0["isConnected"] == true })
        }
        // Paced: far fewer lists than joins.
        let most = lists.max() ?? 0
        #expect(most < n / 4, "at most one list per window: \(most)")
        print("storm: \(n) joins; lists per socket: max \(most), mean \(lists.reduce(0, +) / n)")
    }

    /// The names the SocketChat updates in `texts` are about, in order (`+name` joined,
    /// `-name` exited).
    static func updates(_ texts: [String]) -> [String] {
        socketChatUpdates(texts).map { ($0.joined ? "+" : "-") + $0.nickname }
    }

    /// What a socket's pacing holds is not overtaken by its own `connectUser` (its list and
    /// update go at once) nor dropped by its `exitUser` (it goes on listening): a join that
    /// happened first is shown first, whatever the window.
    @Test func heldUpdatesGoBeforeTheSocketsOwnJoinAndSurviveItsExit() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let observer = try socketIOClient(server, nickname: "observer")
        func joined(_ name: String) -> (String) -> Bool {
            { eventArguments($0, "userConnectUpdate")?.first?["nickname"]?.stringValue == name }
        }
        // A listening socket that identifies right after a join it was shown inside its window.
        for round in 0..<5 {
            // Every socket is open first: from the first join on, the steps fit in the 50 ms window.
            let listener = try socketIOClient(server)
            let first = try socketIOClient(server)
            let second = try socketIOClient(server)
            defer { for socket in [listener, first, second] { socket.abort() } }
            var texts: [String] = []
            try first.sendText("42[\"connectUser\",\"first\(round)\"]")
            try readTexts(listener, into: &texts, until: joined("first\(round)"))   // a list just went: a window opens
            try second.sendText("42[\"connectUser\",\"second\(round)\"]")
            _ = try observer.receiveText(until: joined("second\(round)"))             // the hub has second's join
            try listener.sendText("42[\"connectUser\",\"self\(round)\"]")         // so it is before this one
            try readTexts(listener, into: &texts, until: joined("self\(round)"))
            try? readTexts(listener, into: &texts, timeout: 0.3, until: { _ in false })
            let order = Self.updates(texts).filter { $0.hasSuffix("\(round)") }
            #expect(order == ["+first\(round)", "+second\(round)", "+self\(round)"], "round \(round): \(order)")
        }
        // An identified socket that exits right after a join it was shown inside its window.
        for round in 0..<5 {
            let leaver = try socketIOClient(server, nickname: "leaver\(round)")
            let first = try socketIOClient(server)
            let second = try socketIOClient(server)
            defer { for socket in [leaver, first, second] { socket.abort() } }
            var texts: [String] = []
            try first.sendText("42[\"connectUser\",\"early\(round)\"]")
            try readTexts(leaver, into: &texts, until: joined("early\(round)"))
            try second.sendText("42[\"connectUser\",\"late\(round)\"]")
            _ = try observer.receiveText(until: joined("late\(round)"))
            try leaver.sendText("42[\"exitUser\",\"leaver\(round)\"]")
            try readTexts(leaver, into: &texts, until: { eventArguments($0, "userExitUpdate")?.first?.stringValue == "leaver\(round)" })
            try? readTexts(leaver, into: &texts, timeout: 0.3, until: { _ in false })
            let order = Self.updates(texts).filter { $0.hasSuffix("\(round)") }
            #expect(order == ["+early\(round)", "+late\(round)", "-leaver\(round)"], "round \(round): \(order)")
        }
    }

    /// SocketChat's order, kept through the pacing: a client that waits for the `userList`
    /// showing a change, then for the change's `userConnectUpdate` / `userExitUpdate`, gets
    /// both. So the list in effect when an update arrives (the last one before it) already
    /// shows that update, however many joins or exits share a window.
    @Test func inBurstsOfJoinsAndExitsEveryUpdateFollowsAListThatShowsIt() throws {
        let k = 40
        let server = try startTestServer()
        defer { server.shutdown() }
        let watcher = try socketIOClient(server, nickname: "watcher")
        var others: [TestWebSocket] = []
        for _ in 0..<k { others.append(try socketIOClient(server)) }
        var texts: [String] = []
        // Every join in one burst; once the watcher heard them all, every exit in one burst.
        for (index, client) in others.enumerated() { try client.sendText("42[\"connectUser\",\"burst\(index)\"]") }
        try readSocketChatUpdates(watcher, "userConnectUpdate", count: k, prefix: "burst", into: &texts)
        for (index, client) in others.enumerated() { try client.sendText("42[\"exitUser\",\"burst\(index)\"]") }
        try readSocketChatUpdates(watcher, "userExitUpdate", count: k, prefix: "burst", into: &texts)
        let updates = socketChatUpdates(texts).filter { $0.nickname.hasPrefix("burst") }
        for update in updates {
            let shown = update.listBefore[update.nickname] == true
            #expect(shown == update.joined, "\(update.joined ? "userConnectUpdate" : "userExitUpdate")(\(update.nickname)) after a list showing it \(shown ? "connected" : "gone")")
        }
        #expect(updates.count == 2 * k)
        let lists = texts.filter { eventArguments($0, "userList") != nil }.count
        // Paced: fewer lists than changes (else this test would not merge any).
        #expect(lists < 2 * k, "\(lists) lists for \(2 * k) changes")
    }
}

/// The native door's side of a storm of joins, measured: each join sends the joiner one
/// `observable_members` (at most `--max-members-listed` members) and every other member one
/// small `observable_member_join`, so a socket gets O(n) bytes for n joins, not O(n²), and
/// nothing needs pacing.
@Suite(.serialized) struct NativeJoinStormTests {
    @Test func aThousandJoinsInOneBurstDisconnectNobodyAndCostEachSocketLinearBytes() throws {
        let n = 1_000
        let server = try startTestServer()
        defer { server.shutdown() }
        var clients: [TestWebSocket] = []
        for index in 0..<n {
            let ws = try TestWebSocket(port: server.httpPort)
            try ws.sendText("{\"type\":\"handshake\",\"channel\":\"demo\",\"callback\":0,\"client_data\":{\"name\":\"n\(index)\"}}")
            _ = try ws.receiveText()
            clients.append(ws)
        }
        for ws in clients { try ws.sendText("{\"type\":\"subscribe\",\"room\":\"observable-storm\",\"callback\":1}") }
        var bytes = [Int](repeating: 0, count: n)
        var joins = [Int](repeating: 0, count: n)
        var members = [Int](repeating: 0, count: n)
        var settled = 0
        try SocketIOStormTests.drain(clients, deadline: Date().addingTimeInterval(180), onText: { index, text in
            bytes[index] += text.utf8.count
            if text.contains("\"observable_member_join\"") { joins[index] += 1 }
            if text.contains("\"observable_members\"") {
                members[index] = (try? JSONParser.parse(text))?["data"]?.arrayValue?.count ?? 0
            }
            // Settled: its own list plus a join for everyone after it makes n members.
            if members[index] > 0 && members[index] + joins[index] == n { settled += 1 }
        }, done: { settled == n })
        #expect(server.openConnectionCount == n, "nobody was disconnected")
        let most = bytes.max() ?? 0
        #expect(most < 400 * n, "linear in n: \(most) bytes")
        print("native storm: \(n) joins; bytes per socket: max \(most), mean \(bytes.reduce(0, +) / n)")
    }
}
