import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// The store fails (an injected failure, as a full disk makes it fail): every door's answer
/// says so, nothing that was not stored is delivered, and offsets go on without a gap once the
/// store works again. Runs for everyone; `FullDiskTests` does it with a real full disk as root.
@Suite(.serialized) struct StoreFailureTests {
    static func configuration() -> ServerConfiguration {
        .forTests { $0.nativeRatePerSecond = 1_000_000; $0.nativeBurst = 1_000_000 }
    }

    @Test func failedAppendsGetErrorRepliesDeliverNothingAndOffsetsContinueAfterRecovery() async throws {
        let (server, faults) = try ParleyServer.withInjectableFaults(Self.configuration())
        defer { server.shutdown() }
        let watcher = try await NativeClient.connect(server)
        _ = try await watcher.subscribe("full")
        let client = try await NativeClient.connect(server)
        for n in 1...3 {
            #expect(try await client.publishAcknowledged(.string("m\(n)"), to: "full")["offset"]?.intValue == n)
            #expect(try await watcher.next()["message"] == .string("m\(n)"))
        }

        faults.failAllAppends()
        for n in 4...6 {
            let reply = try await client.publishAcknowledged(.string("lost \(n)"), to: "full")
            #expect(reply["error"]?.stringValue?.contains("disk full") == true, "\(reply)")
            #expect(reply["offset"] == nil && reply["id"] == nil, "\(reply)")
        }
        #expect(faults.injectedFailures == 3)

        faults.stopFailing()
        let back = try await client.publishAcknowledged("space is back", to: "full")
        #expect(back["offset"] == 4, "offsets go on from the last stored one: \(back)")
        // None of the failed ones reached the watcher: the next thing it gets is this one.
        let next = try await watcher.next()
        #expect(next["message"] == "space is back" && next["offset"] == 4, "\(next)")
        let history = try await client.history("full", limit: 100)
        #expect(history["messages"]?.arrayValue?.map { $0["message"] } == ["m1", "m2", "m3", "space is back"])
        #expect(history["messages"]?.arrayValue?.map { $0["offset"] } == [1, 2, 3, 4])
    }

    /// Many publishes in flight when one append fails: each is acknowledged or refused, and
    /// exactly the acknowledged ones are delivered and stored, with offsets 1…n.
    @Test func aFailureAmongPublishesInFlightLeavesNoGapAndNoGhost() async throws {
        let (server, faults) = try ParleyServer.withInjectableFaults(Self.configuration())
        defer { server.shutdown() }
        let watcher = try await NativeClient.connect(server)
        _ = try await watcher.subscribe("burst")
        let client = try await NativeClient.connect(server)
        for n in 1...10 {
            try client.send(["type": "publish", "room": "burst", "message": .string("a\(n)"), "callback": .number(JSONNumber(n))])
        }
        // Armed while the first ten may still be on their way to the store.
        faults.failNextAppends(2)
        for n in 11...40 {
            try client.send(["type": "publish", "room": "burst", "message": .string("b\(n)"), "callback": .number(JSONNumber(n))])
        }
        var acknowledged: [(message: String, offset: Int)] = [], refused = 0
        while acknowledged.count + refused < 40 {
            let reply = try await client.next()
            guard let callback = reply["callback"]?.intValue else { continue }
            if let offset = reply["offset"]?.intValue {
                acknowledged.append((callback <= 10 ? "a\(callback)" : "b\(callback)", offset))
            } else {
                #expect(reply["error"]?.stringValue?.isEmpty == false, "\(reply)")
                refused += 1
            }
        }
        #expect(faults.injectedFailures == 2)
        #expect(refused >= 2)
        acknowledged.sort { $0.offset < $1.offset }
        #expect(acknowledged.map(\.offset) == Array(1...acknowledged.count), "acknowledged offsets are 1…n")
        // The watcher gets exactly the acknowledged messages, in offset order, then the marker.
        try client.publish("marker", to: "burst")
        var delivered: [(message: String, offset: Int)] = []
        while true {
            let push = try await watcher.next()
            guard let message = push["message"]?.stringValue, let offset = push["offset"]?.intValue else { continue }
            if message == "marker" {
                #expect(offset == acknowledged.count + 1)
                break
            }
            delivered.append((message, offset))
        }
        #expect(delivered.map(\.message) == acknowledged.map(\.message))
        #expect(delivered.map(\.offset) == acknowledged.map(\.offset))
        let history = try await client.history("burst", limit: 100)
        #expect(history["messages"]?.arrayValue?.compactMap { $0["message"]?.stringValue } == acknowledged.map(\.message) + ["marker"])
    }

    /// REST answers a publish once it is stored: 503 with a text body when the store fails
    /// (nothing delivered), 200 once it works again; a multi-room publish reports per room.
    @Test func restPublishAnswersAfterTheStoreAndReportsFailures() async throws {
        let (server, faults) = try ParleyServer.withInjectableFaults(Self.configuration())
        defer { server.shutdown() }
        let watcher = try await NativeClient.connect(server)
        _ = try await watcher.subscribe("rest")
        faults.failAllAppends()
        let refused = try await httpRequest(port: server.httpPort, "POST", "/demo/rest/publish", json: #""lost""#)
        #expect(refused.status == 503)
        #expect(refused.body.contains("disk full"))
        let all = try await httpRequest(port: server.httpPort, "POST", "/demo/publish/rooms?r=rest&r=other", json: #""lost too""#)
        #expect(all.status == 503)
        faults.stopFailing()
        let stored = try await httpRequest(port: server.httpPort, "POST", "/demo/rest/publish", json: #""kept""#)
        #expect(stored.status == 200)
        #expect(try json(stored.body)["offset"] == 1)
        // Nothing failed reached the subscriber: the stored one is the next thing it gets.
        #expect(try await watcher.next()["message"] == "kept")
        // One room of two fails: 207, one receipt and one error, in the order asked.
        faults.failNextAppends(1)
        let partial = try await httpRequest(port: server.httpPort, "POST", "/demo/publish/rooms?r=first&r=rest", json: #""half""#)
        let entries = try json(partial.body).arrayValue ?? []
        #expect(partial.status == 207)
        #expect(entries.map { $0["room"] } == ["first", "rest"])
        #expect(entries.filter { $0["error"] != nil }.count == 1)
        #expect(entries.filter { $0["offset"] != nil }.count == 1)
        if let delivered = entries.first(where: { $0["room"] == "rest" }), delivered["offset"] != nil {
            #expect(try await watcher.next()["message"] == "half")
        }
    }
}
