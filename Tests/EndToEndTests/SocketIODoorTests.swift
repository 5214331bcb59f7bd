import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing

@Suite(.serialized) struct SocketIODoorTests {
    @Test func eio4PollingHandshakeServerPingsAndChat() throws {
        let server = try startTestServer { $0.socketIOPingIntervalMillis = 300; $0.socketIOPingTimeoutMillis = 2000 }
        defer { server.shutdown() }
        let client = try PollingClient.open(port: server.httpPort, version: 4)
        #expect(client.sid.count >= 16)
        #expect(client.open["upgrades"] == ["websocket"])
        #expect(client.open["pingInterval"] == 300)
        #expect(client.open["pingTimeout"] == 2000)
        #expect(client.open["maxPayload"] == 1_000_000)
        #expect(client.rest.isEmpty, "EIO4 waits for the client's CONNECT")
        #expect(try client.post(["40"]).body == "ok")
        let connect = try client.poll(until: { $0.hasPrefix("40") })
        let socketID = try #require(try JSONParser.parse(String(connect.dropFirst(2)))["sid"]?.stringValue)
        #expect(socketID != client.sid, "the Socket.IO id is not the Engine.IO session id")
        // The server pings within the interval; the client pongs.
        #expect(try client.poll(until: { $0 == "2" }, timeout: 3) == "2")
        try client.post(["3"])
        try client.post(["42[\"connectUser\",\"bob\"]"])
        let list = try client.poll(until: { eventArguments($0, "userList") != nil })
        #expect(eventArguments(list, "userList") == [[["id": .string(socketID), "nickname": "bob", "isConnected": true]]])
        try client.post(["421[\"chatMessage\",\"bob\",\"hello\"]"])
        // The ack comes once the message is stored, so it may come before or after the
        // message itself.
        var ack: String?, message: String?
        while ack == nil || message == nil {
            let packet = try client.poll(until: { $0.hasPrefix("43") || eventArguments($0, "newChatMessage") != nil })
            if packet.hasPrefix("43") { ack = packet } else { message = packet }
        }
        #expect(ack == "431[]")
        let arguments = try #require(eventArguments(message ?? "", "newChatMessage"))
        #expect(arguments.count == 3)
        #expect(arguments[0] == "bob")
        #expect(arguments[1] == "hello")
        #expect(arguments[2].stringValue?.hasSuffix("GMT") == true)
    }

    @Test func eio3PollingHandshakeSendsConnectAndAnswersClientPings() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        for version in [nil, 3] {
            let client = try PollingClient.open(port: server.httpPort, version: version)
            #expect(client.open["maxPayload"] == nil)
            #expect(client.open["pingInterval"] == 25000)
            #expect(client.open["pingTimeout"] == 20000)
            #expect(client.rest == ["40"], "a Socket.IO v2 server connects / at once")
            try client.post(["2"])
            #expect(try client.poll() == ["3"])
            try client.post(["2probe"])
            #expect(try client.poll() == ["3probe"])
            // Events work without a client CONNECT; a duplicate `40` changes nothing.
            try client.post(["40", "42[\"connectUser\",\"carol\"]"])
            let list = try client.poll(until: { eventArguments($0, "userList") != nil })
            #expect(eventArguments(list, "userList")?.first?.arrayValue?.first?["nickname"] == "carol")
            try client.post(["1"])
        }
    }

    @Test func upgradeToWebSocketThenPollingIsRefused() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        for version in [4, 3] {
            let client = try PollingClient.open(port: server.httpPort, version: version)
            // A GET held while the upgrade happens is released with a noop.
            let held = try HeldRequest(port: server.httpPort, "GET", "/socket.io/?\(client.query)")
            try server.settle()   // the session holds it now
            let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=\(version)&transport=websocket&sid=\(client.sid)")
            try ws.sendText("2probe")
            #expect(try ws.receiveText() == "3probe")
            #expect(try held.response().body == (version == 4 ? "6" : "1:6"))
            try ws.sendText("5")
            if version == 4 {
                try ws.sendText("40")
                #expect(try ws.receiveText().hasPrefix("40{\"sid\":"))
            }
            try ws.sendText("42[\"connectUser\",\"dora\(version)\"]")
            let list = try ws.receiveText(until: { eventArguments($0, "userList") != nil })
            #expect(eventArguments(list, "userList")?.first?.arrayValue?.contains { $0["nickname"] == .string("dora\(version)") } == true)
            #expect(try client.get().status == 400)
            if version == 3 {
                try ws.sendText("2")
                #expect(try ws.receiveText(until: { !$0.hasPrefix("42") }) == "3")
            }
            // A POST is taken only within the late-POST grace after the `5`.
            Thread.sleep(forTimeInterval: Double(EngineIOSession.latePostGraceMillis) / 1000 + 0.2)
            #expect(try client.post(["2"]).status == 400)
        }
    }

    /// Socket.IO-Client-Swift POSTs `40` and its first emits while it probes and sends `5`
    /// without waiting: that POST can arrive after the `5`. It is answered and handled, and
    /// before what the WebSocket brought meanwhile.
    @Test func aPostThatArrivesJustAfterTheUpgradeIsHandledFirst() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        for version in [4, 3] {
            let client = try PollingClient.open(port: server.httpPort, version: version)
            let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=\(version)&transport=websocket&sid=\(client.sid)")
            try ws.sendText("2probe")
            #expect(try ws.receiveText() == "3probe")
            try ws.sendText("5")
            // Over the WebSocket, right after the `5`: an event that needs the CONNECT the
            // late POST carries (on EIO3 the server connected `/` at once).
            try ws.sendText("421[\"connectUser\",\"late\(version)\"]")
            var packets = ["42[\"chatMessage\",\"late\(version)\",\"posted late\"]"]
            if version == 4 { packets.insert("40", at: 0) }
            let response = try client.post(packets)
            #expect(response.status == 200, "\(response.body)")
            #expect(response.body == "ok")
            // The WebSocket's connectUser is handled after the POST's packets: it finds the
            // socket connected (an event before CONNECT gets no ack) and a member already
            // (the chatMessage joined it), so its ack says done. The message comes once it
            // is stored, so it may come before or after that ack.
            var texts: [String] = []
            while !(texts.contains { $0.hasPrefix("43") } && texts.contains { eventArguments($0, "newChatMessage") != nil }) {
                texts.append(try ws.receiveText())
            }
            if version == 4 { #expect(texts.first?.hasPrefix("40{\"sid\":") == true, "\(texts)") }
            #expect(texts.first { $0.hasPrefix("43") } == "431[]")
            let chat = try #require(texts.first { eventArguments($0, "newChatMessage") != nil })
            #expect(eventArguments(chat, "newChatMessage")?.prefix(2) == [.string("late\(version)"), "posted late"])
            #expect(server.hub.members(of: server.configuration.lobby).map(\.displayName).contains("late\(version)"))
            ws.abort()
        }
    }

    @Test func webSocketOnlySessionsAndErrors() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        // An event before CONNECT: a CONNECT_ERROR says why, then the connection is closed,
        // as the protocol requires.
        let early = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        let open = try JSONParser.parse(String(try early.receiveText().dropFirst()))
        #expect(open["upgrades"] == [])
        try early.sendText("42[\"connectUser\",\"x\"]")
        #expect(try early.receiveText().hasPrefix("44{\"message\":\"not connected"))
        #expect(try early.waitForClose() != nil)
        let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try ws.receiveText()
        // An unknown namespace gets CONNECT_ERROR "Invalid namespace"; the connection goes on.
        try ws.sendText("40/admin,")
        #expect(try ws.receiveText() == "44/admin,{\"message\":\"Invalid namespace\"}")
        try ws.sendText("40/,")
        #expect(try ws.receiveText().hasPrefix("40{\"sid\":"))
        // An unknown event without an ack id gets nothing (never an event named `error`); with
        // one, its ack carries the error.
        try ws.sendText("42[\"noSuchEvent\"]")
        try ws.sendText("4211[\"noSuchEvent\"]")
        let unknown = try ws.receiveText()
        #expect(unknown.hasPrefix("4311[{\"error\":\"unknown event"), "\(unknown)")
        try ws.sendText("4212[\"connectUser\",\"\"]")
        #expect(try ws.receiveText().hasPrefix("4312[{\"error\":"))
        try ws.sendText("4213[\"connectUser\",\"eve\"]")
        #expect(try ws.receiveText(until: { $0.hasPrefix("43") }) == "4313[]")
        // Garbage Socket.IO packets: a CONNECT_ERROR saying why, then the connection is closed.
        for garbage in ["4zzz", "42{}", "42[\"a\"", "49", "4", "42abc[\"a\"]"] {
            let victim = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
            _ = try victim.receiveText()
            try victim.sendText("40")
            _ = try victim.receiveText()
            try victim.sendText(garbage)
            let error = try victim.receiveText()
            #expect(error.hasPrefix("44{\"message\":\"invalid packet"), "\(garbage) -> \(error)")
            #expect(try victim.waitForClose() != nil, "\(garbage)")
        }
        // A garbage Engine.IO packet ends the transport.
        try ws.sendText("9")
        #expect(try ws.waitForClose() == 1002)
        // EIO3 WebSocket-only: open then 40.
        let v3 = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=3&transport=websocket")
        #expect(try v3.receiveText().hasPrefix("0{"))
        #expect(try v3.receiveText() == "40")
        try v3.sendText("40/chat,")
        #expect(try v3.receiveText() == "44/chat,\"Invalid namespace\"")
    }

    @Test func badRequestsGet400() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let port = server.httpPort
        #expect(try httpRequest(port: port, "GET", "/socket.io/?EIO=4&transport=polling&sid=nope").status == 400)
        #expect(try httpRequest(port: port, "POST", "/socket.io/?EIO=4&transport=polling&sid=nope", body: Array("40".utf8)).status == 400)
        #expect(try httpRequest(port: port, "GET", "/socket.io/?EIO=5&transport=polling").status == 400)
        #expect(try httpRequest(port: port, "GET", "/socket.io/?EIO=4&transport=carrier-pigeon").status == 400)
        #expect(try httpRequest(port: port, "GET", "/socket.io/?EIO=4&transport=websocket").status == 400)
        #expect(try httpRequest(port: port, "POST", "/socket.io/?EIO=4&transport=polling", body: []).status == 400)
        // A second concurrent GET: 400 (and the session is closed, as upstream does).
        let client = try PollingClient.open(port: port, version: 4)
        let held = try HeldRequest(port: port, "GET", "/socket.io/?\(client.query)")
        try server.settle()   // the session holds it now
        #expect(try client.get().status == 400)
        #expect(try held.response().status == 200)
        #expect(try client.get().status == 400)
        // Malformed payloads: 400 with text, and the session is closed (the protocol's rule).
        let other = try PollingClient.open(port: port, version: 4)
        let bad = try other.post(["9garbage"])
        #expect(bad.status == 400)
        #expect(bad.body.contains("unknown packet type"))
        #expect(try other.post(["40"]).status == 400)
        #expect(try other.get().status == 400)
        let v3 = try PollingClient.open(port: port, version: 3)
        let truncated = try httpRequest(port: port, "POST", "/socket.io/?EIO=3&transport=polling&sid=\(v3.sid)", body: Array("5:42".utf8))
        #expect(truncated.status == 400)
        #expect(truncated.body.contains("truncated"))
    }

    @Test func corsPreflightAndOriginEcho() throws {
        let origin = "http://chat.example:3000"
        let server = try startTestServer { $0.allowedOrigins = [origin] }
        defer { server.shutdown() }
        let preflight = try httpRequest(port: server.httpPort, "OPTIONS", "/socket.io/?EIO=4&transport=polling",
                                    headers: [("Origin", origin), ("Access-Control-Request-Method", "POST"),
                                              ("Access-Control-Request-Headers", "content-type")])
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Origin") == origin)
        #expect(preflight.header("Access-Control-Allow-Credentials") == "true")
        #expect(preflight.header("Access-Control-Allow-Methods")?.contains("POST") == true)
        #expect(preflight.header("Access-Control-Allow-Headers") == "content-type")
        let open = try httpRequest(port: server.httpPort, "GET", "/socket.io/?EIO=4&transport=polling", headers: [("Origin", origin)])
        #expect(open.status == 200)
        #expect(open.header("Access-Control-Allow-Origin") == origin)
        #expect(open.header("Access-Control-Allow-Credentials") == "true")
        let sid = try #require(try JSONParser.parse(String(open.body.dropFirst()))["sid"]?.stringValue)
        let post = try httpRequest(port: server.httpPort, "POST", "/socket.io/?EIO=4&transport=polling&sid=\(sid)",
                               body: Array("40".utf8), headers: [("Origin", origin)])
        #expect(post.header("Access-Control-Allow-Origin") == origin)
        let plain = try httpRequest(port: server.httpPort, "GET", "/socket.io/?EIO=4&transport=polling")
        #expect(plain.header("Access-Control-Allow-Origin") == nil)
        // A page of an origin nobody allowed gets no session and no CORS answer.
        for method in ["GET", "OPTIONS"] {
            let other = try httpRequest(port: server.httpPort, method, "/socket.io/?EIO=4&transport=polling",
                                    headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")])
            #expect(other.status == 403 && other.body.contains("--allowed-origins"))
            #expect(other.header("Access-Control-Allow-Origin") == nil)
        }
    }

    /// Any web page the user opens could otherwise drive a server on the user's machine:
    /// every door behind the HTTP port refuses other origins, and on loopback a name that
    /// was rebound to 127.0.0.1 (DNS rebinding).
    @Test func otherWebPagesAndReboundNamesAreRefusedOnEveryHTTPDoor() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let port = server.httpPort
        let evil = [("Origin", "https://evil.example")]
        #expect(try httpRequest(port: port, "POST", "/demo/observable-room/publish", body: Array("\"x\"".utf8), headers: evil).status == 403)
        #expect(try httpRequest(port: port, "GET", "/demo/stats", headers: evil).status == 403)
        let upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                       ("Sec-WebSocket-Version", "13")]
        #expect(try httpRequest(port: port, "GET", "/v3/websocket", headers: upgrade + evil).status == 403)
        #expect(try httpRequest(port: port, "GET", "/socket.io/?EIO=4&transport=websocket", headers: upgrade + evil).status == 403)
        // The server's own pages, and clients that are not browsers, are served.
        let own = try httpRequest(port: port, "", "", raw: "GET /demo/stats HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nOrigin: http://127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
        #expect(own.status == 200, "\(own.body)")
        #expect(try httpRequest(port: port, "GET", "/demo/stats").status == 200)
        #expect(try httpRequest(port: port, "GET", "/v3/websocket", headers: upgrade, timeout: 0.5).status == 101)
        // DNS rebinding: evil.example resolves to 127.0.0.1 now, so its page is "same origin".
        let rebound = try httpRequest(port: port, "", "", raw: "GET /demo/stats HTTP/1.1\r\nHost: evil.example:\(port)\r\nOrigin: http://evil.example:\(port)\r\nConnection: close\r\n\r\n")
        #expect(rebound.status == 421, "\(rebound.body)")
        #expect(server.core.limits.count(.webOrigin) == 5)
    }

    /// An oversized message ends its session on every transport and version (as engine.io
    /// does), so the client sees the session end and reconnects; nobody else notices.
    /// The placeholder amplification through the door, before any authentication: one 50 KB
    /// attachment named by 2,000 placeholders (a 125 KB POST) was turned into 133 MB of
    /// base64. Now the session gets CONNECT_ERROR saying why and ends; the next client chats.
    @Test func aBinaryEventNamingOneAttachmentTwiceEndsItsSession() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let client = try PollingClient.open(port: server.httpPort, version: 4)
        try client.post(["40"])
        _ = try client.poll(until: { $0.hasPrefix("40") })
        let placeholders = Array(repeating: #"{"_placeholder":true,"num":0}"#, count: 2_000).joined(separator: ",")
        let attachment = "b" + Data(repeating: 7, count: 50_000).base64EncodedString()
        #expect(try client.post(["451-[\"chatMessage\",\"bob\",\(placeholders)]", attachment]).status == 200)
        let error = try client.poll(until: { $0.hasPrefix("44") })
        #expect(error == #"44{"message":"invalid packet: placeholder 0 is used more than once"}"#)
        let next = try PollingClient.open(port: server.httpPort, version: 4)
        try next.post(["40", "42[\"connectUser\",\"carol\"]"])
        #expect(eventArguments(try next.poll(until: { eventArguments($0, "userList") != nil }), "userList") != nil)
    }

    @Test func hugePostsEndTheirSessionAndNobodyElseNotices() throws {
        let server = try startTestServer { $0.socketIOMaxPayload = 1000 }
        defer { server.shutdown() }
        let bystander = try PollingClient.open(port: server.httpPort, version: 4)
        try bystander.post(["40", "42[\"connectUser\",\"by\"]"])
        _ = try bystander.poll(until: { eventArguments($0, "userList") != nil })
        for version in [4, 3] {
            // 10 MB: the HTTP parser refuses it before reading it all; the session ends.
            let victim = try PollingClient.open(port: server.httpPort, version: version)
            let socket = try TestSocket(port: server.httpPort)
            try socket.send("POST /socket.io/?EIO=\(version)&transport=polling&sid=\(victim.sid) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\n\r\n")
            _ = try? socket.send([UInt8](repeating: 0x34, count: 1 << 20))
            if version == 4 {
                #expect(try socket.readLine().hasPrefix("HTTP/1.1 413"))
            } else {
                // As engine.io 3: the connection is closed without an answer.
                #expect(try bytesUntilClosed(socket).isEmpty)
            }
            try eventuallyBlocking("the EIO\(version) session ended") { try victim.get().status == 400 }
            // Over maxPayload but under the HTTP limit: EIO4 gets 413 with text, EIO3 no answer;
            // a GET held meanwhile gets a 400 (what makes clients reconnect, where a close
            // packet would read as a goodbye). Either way the session ends.
            let second = try PollingClient.open(port: server.httpPort, version: version)
            let held = try HeldRequest(port: server.httpPort, "GET", "/socket.io/?\(second.query)")
            try server.settle()
            if version == 4 {
                let big = try second.post(["4" + String(repeating: "x", count: 2000)])
                #expect(big.status == 413)
                #expect(big.body.contains("payload too large"))
                #expect(try held.response().status == 400)
            } else {
                let post = try TestSocket(port: server.httpPort)
                let body = "2001:4" + String(repeating: "x", count: 2000)
                try post.send("POST /socket.io/?\(second.query) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                #expect(try bytesUntilClosed(post).isEmpty)
                #expect(try held.response().status == 400)
            }
            #expect(try second.get().status == 400)
            // A WebSocket message over maxPayload closes that WebSocket with 1009, and its
            // session with it (a watcher sees the user leave).
            let ws = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=\(version)&transport=websocket")
            _ = try ws.receiveText()
            if version == 4 {
                try ws.sendText("40")
                _ = try ws.receiveText()
            } else {
                _ = try ws.receiveText()  // 40
            }
            try ws.sendText("42[\"connectUser\",\"big\(version)\"]")
            _ = try bystander.poll(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == .string("big\(version)") })
            try ws.sendText("4" + String(repeating: "y", count: 5000))
            #expect(try ws.waitForClose() == 1009)
            _ = try bystander.poll(until: { eventArguments($0, "userExitUpdate")?.first == .string("big\(version)") })
            // An upgraded session too.
            let upgraded = try PollingClient.open(port: server.httpPort, version: version)
            let link = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=\(version)&transport=websocket&sid=\(upgraded.sid)")
            try link.sendText("2probe")
            #expect(try link.receiveText() == "3probe")
            try link.sendText("5")
            try link.sendText("4" + String(repeating: "z", count: 5000))
            #expect(try link.waitForClose() == 1009)
            try eventuallyBlocking("the upgraded EIO\(version) session ended") { server.socketIOShared.sessions.owner(of: upgraded.sid) == nil }
        }
        // The others carry on.
        try bystander.post(["42[\"chatMessage\",\"by\",\"still here\"]"])
        let message = try bystander.poll(until: { eventArguments($0, "newChatMessage") != nil })
        #expect(eventArguments(message, "newChatMessage")?[1] == "still here")
    }

    @Test func heartbeatTimeoutEndsTheSessionAndMarksTheUserDisconnected() throws {
        let server = try startTestServer { $0.socketIOPingIntervalMillis = 200; $0.socketIOPingTimeoutMillis = 200 }
        defer { server.shutdown() }
        let watcher = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try watcher.receiveText()
        try watcher.sendText("40")
        try watcher.sendText("42[\"connectUser\",\"watcher\"]")
        _ = try watcher.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        let quiet = try PollingClient.open(port: server.httpPort, version: 4)
        try quiet.post(["40", "42[\"connectUser\",\"quiet\"]"])
        _ = try watcher.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        // `quiet` never pongs; the watcher pongs every ping.
        let deadline = Date().addingTimeInterval(5)
        var exit: [JSONValue]?
        var list: [JSONValue]?
        while exit == nil, deadline.timeIntervalSinceNow > 0 {
            let text = try watcher.receiveText(timeout: max(0.01, deadline.timeIntervalSinceNow))
            if text == "2" { try watcher.sendText("3") }
            if let arguments = eventArguments(text, "userList") { list = arguments }
            exit = eventArguments(text, "userExitUpdate")
        }
        #expect(exit == ["quiet"])
        #expect(list?.first?.arrayValue?.first { $0["nickname"] == "quiet" }?["isConnected"] == false)
        #expect(try quiet.get().status == 400)
    }

    @Test func crossDoorChatTypingAndPresence() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let sio = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try sio.receiveText()
        try sio.sendText("40")
        try sio.sendText("42[\"connectUser\",\"sam\"]")
        _ = try sio.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        let native = try await NativeClient.connect(server, clientData: ["name": "nina", "color": "#00FF00"])
        try await native.subscribe(server.configuration.lobby.room)
        let members = try await native.next { $0["type"] == "observable_members" }
        #expect(members["data"]?.arrayValue?.first?["clientData"]?["name"] == "sam")
        let connect = try sio.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        #expect(eventArguments(connect, "userConnectUpdate")?.first?["nickname"] == "nina")
        let line = try TestSocket(port: server.linePort)
        try line.send("iam:lou\n")
        _ = try line.readLine(until: { $0 == "lou has joined" })
        _ = try sio.receiveText(until: { eventArguments($0, "userConnectUpdate")?.first?["nickname"] == "lou" })
        // Socket.IO → line and native.
        try sio.sendText("42[\"startType\",\"sam\"]")
        let typing = try await native.next { $0["type"] == "publish" }
        #expect(typing["message"] == ["typing": true])
        try sio.sendText("42[\"chatMessage\",\"sam\",\"hi all\"]")
        #expect(try line.readLine(until: { $0.hasPrefix("sam") }) == "sam:hi all")
        let chatToNative = try await native.next { $0["type"] == "publish" && $0["message"]?.stringValue != nil }
        #expect(chatToNative["message"] == "hi all")
        // Native typing and messages → Socket.IO.
        try native.publish(["typing": true], to: server.configuration.lobby.room)
        let update = try sio.receiveText(until: { eventArguments($0, "userTypingUpdate")?.first?["nina"] != nil })
        #expect(eventArguments(update, "userTypingUpdate") == [["nina": 1]])
        try native.publish("from native", to: server.configuration.lobby.room)
        let chat = try sio.receiveText(until: { eventArguments($0, "newChatMessage") != nil })
        #expect(eventArguments(chat, "newChatMessage")?.prefix(2) == ["nina", "from native"])
        try line.send("msg:from line\n")
        let lineChat = try sio.receiveText(until: { eventArguments($0, "newChatMessage") != nil })
        #expect(eventArguments(lineChat, "newChatMessage")?.prefix(2) == ["lou", "from line"])
        // Leaving crosses too.
        line.abort()
        let exit = try sio.receiveText(until: { eventArguments($0, "userExitUpdate") != nil })
        #expect(eventArguments(exit, "userExitUpdate") == ["lou"])
        // exitUser: the others see it, the leaver hears its own exit, and the list forgets it.
        try sio.sendText("42[\"exitUser\",\"sam\"]")
        #expect(eventArguments(try sio.receiveText(until: { eventArguments($0, "userExitUpdate") != nil }), "userExitUpdate") == ["sam"])
        let leave = try await native.next { $0["type"] == "observable_member_leave" && $0["data"]?["clientData"]?["name"] == "sam" }
        #expect(leave["data"]?["clientData"]?["name"] == "sam")
    }

    @Test func unidentifiedSocketHearsTheLobbyAndLeavesNoTrace() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let lurker = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try lurker.receiveText()
        try lurker.sendText("40")
        _ = try lurker.receiveText()
        // Never identified: as the classic server's io.emit, it hears the lobby (an app that
        // reconnected never sends connectUser again), but it is no member, and its going
        // away makes nobody see a userExitUpdate(null).
        let other = try TestWebSocket(port: server.httpPort, path: "/socket.io/?EIO=4&transport=websocket")
        _ = try other.receiveText()
        try other.sendText("40")
        try other.sendText("42[\"connectUser\",\"olga\"]")
        _ = try other.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        let heard = try lurker.receiveText(until: { eventArguments($0, "userConnectUpdate") != nil })
        #expect(eventArguments(heard, "userConnectUpdate")?.first?["nickname"] == "olga")
        #expect(server.hub.members(of: server.configuration.lobby).map(\.displayName) == ["olga"])
        // The lurker's own request is answered.
        try lurker.sendText("4242[\"noSuchEvent\"]")
        let answer = try lurker.receiveText(until: { $0.hasPrefix("43") })
        #expect(answer.hasPrefix("4342[{\"error\":\"unknown event"), "\(answer)")
        lurker.abort()
        try eventuallyBlocking("the lurker's connection released") { server.openConnectionCount == 1 }
        try server.settle()   // its session is gone, and whatever that announces is on its way
        // Olga's own message comes back (a message is sent as the typing state, then the
        // message), and nothing came before it.
        try other.sendText("42[\"chatMessage\",\"olga\",\"after the lurker\"]")
        let typing = try other.receiveText(), next = try other.receiveText()
        #expect(eventArguments(typing, "userTypingUpdate") == [[:]], "\(typing)")
        #expect(eventArguments(next, "newChatMessage")?[1] == "after the lurker", "\(next)")
    }
}

/// Everything the server sends until it closes the connection (a reset counts as closed).
func bytesUntilClosed(_ socket: TestSocket, timeout: Double = 5) throws -> [UInt8] {
    let deadline = Date().addingTimeInterval(timeout)
    while deadline.timeIntervalSinceNow > 0 {
        guard let open = try? socket.fill(timeout: 0.2) else { return socket.buffered }
        if !open { return socket.buffered }
    }
    throw TestSocket.Failure("the connection stayed open")
}
