import Foundation
import ParleyCore
import ParleyFiles
@testable import ParleyServer
import ParleyTestSupport
import Testing

/// Upload, publish, download: what each door makes of a message with files.
///
/// Tests that publish over REST are async: REST handlers run as tasks, and a test blocking a
/// thread of the small concurrency pool while it waits for one could starve it.
@Suite(.serialized) struct FileDoorTests {
    @Test func imageAndFileReachEveryDoorFilledInByTheServer() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let base = "http://127.0.0.1:\(server.httpPort)"
        let lobby = server.configuration.lobby.room

        let line = try TestSocket(port: server.linePort)
        try line.send("iam:carol\n")
        _ = try line.readLine(until: { $0 == "carol has joined" })
        let sio = try PollingClient.open(port: server.httpPort, version: 4)
        try sio.post(["40"])
        _ = try sio.poll(until: { $0.hasPrefix("40") })
        try sio.post(["42[\"connectUser\",\"dave\"]"])
        _ = try sio.poll(until: { eventArguments($0, "userList") != nil })
        let watcher = try await NativeClient.connect(server, clientData: ["name": "erin"])
        _ = try await watcher.subscribe(lobby)
        let alice = try await NativeClient.connect(server, clientData: ["name": "alice"])

        let photo = try server.uploaded(FileFixtures.photoWithGPS(), name: "photo.jpg", type: "image/jpeg", room: lobby)
        let report = try server.uploaded(FileFixtures.pdf, name: "report.pdf", type: "application/pdf")
        let photoID = try #require(photo["id"]?.stringValue)
        let reportID = try #require(report["id"]?.stringValue)
        #expect(photo["url"]?.stringValue == "\(base)/demo/files/\(photoID)")
        #expect(photo["mime"] == "image/jpeg" && photo["width"] == 32 && photo["height"] == 64, "\(photo)")
        #expect(photo["thumbnail"]?["url"]?.stringValue == "\(base)/demo/files/\(photoID)/thumbnail")
        #expect(report["mime"] == "application/pdf" && report["size"] == 45 && report["width"] == nil)

        // The client's fields are ignored: name, URL and size come from the server's records.
        let forged: JSONValue = ["text": "look", "attachments": [
            ["id": .string(photoID), "name": "evil.exe", "url": "http://evil.example/x", "size": 1, "mime": "text/html"],
            .string(reportID)]]
        let receipt = try await alice.publishAcknowledged(forged, to: lobby)
        #expect(receipt["error"] == nil, "\(receipt)")

        // Native: the body with the records' attachments, other members kept.
        let pushed = try await watcher.next { $0["type"] == "publish" && $0["client_id"]?.stringValue == alice.clientID }
        let body = try #require(pushed["message"])
        guard case .attachments(let message) = AttachmentMessage.classify(body) else {
            Issue.record("not an attachment message: \(body)")
            return
        }
        #expect(message.text == "look")
        #expect(message.attachments.map(\.name) == ["photo.jpg", "report.pdf"])
        #expect(message.attachments.map(\.url) == ["\(base)/demo/files/\(photoID)", "\(base)/demo/files/\(reportID)"])
        #expect(message.attachments[0].isImage && !message.attachments[1].isImage)
        #expect(message.attachments[0].jsonValue == photo && message.attachments[1].jsonValue == report)

        // Line: the caption, then one line per file.
        let photoSize = try #require(photo["size"]?.intValue)
        #expect(try line.readLine(until: { $0.hasPrefix("alice:") }) == "alice:look")
        #expect(try line.readLine() == "alice:[image photo.jpg \(ByteCount.humanReadable(photoSize))] \(base)/demo/files/\(photoID)")
        #expect(try line.readLine() == "alice:[file report.pdf 45 B] \(base)/demo/files/\(reportID)")

        // Socket.IO SocketChat: three strings, the files as `[kind] URL`.
        let chat = try sio.poll(until: { eventArguments($0, "newChatMessage")?.first == "alice" })
        let arguments = try #require(eventArguments(chat, "newChatMessage"))
        #expect(arguments.count == 3)
        #expect(arguments[1].stringValue == "look [image] \(base)/demo/files/\(photoID) [file] \(base)/demo/files/\(reportID)")
        #expect(arguments[2].stringValue?.hasSuffix("GMT") == true)

        // REST publishes them too (by id alone).
        let rest = try await httpRequest(port: server.httpPort, "POST", "/demo/\(lobby)/publish",
                                         json: #"{"attachments":["\#(reportID)"]}"#)
        #expect(rest.status == 200, "\(rest.body)")
        #expect(try line.readLine(until: { $0.hasPrefix("parley:") }) == "parley:[file report.pdf 45 B] \(base)/demo/files/\(reportID)")

        // History: stored with the filled-in attachments.
        let late = try await NativeClient.connect(server, clientData: ["name": "late"])
        _ = try await late.subscribe(lobby, historyCount: 10)
        let old = try await late.next { $0["type"] == "history_message" && $0["message"]?["text"] == "look" }
        #expect(old["message"] == body)

        // The files download with the right types.
        let image = try server.download(message.attachments[0].url)
        #expect(image.status == 200 && image.header("Content-Type") == "image/jpeg")
        #expect(image.header("Content-Disposition")?.hasPrefix("inline") == true)
        let pdf = try server.download(message.attachments[1].url)
        #expect(pdf.status == 200 && pdf.body == FileFixtures.pdf && pdf.header("Content-Type") == "application/pdf")
        #expect(pdf.header("Content-Disposition") == "attachment; filename=\"report.pdf\"; filename*=UTF-8''report.pdf")
    }

    /// Downloads are paced per address (`--download-rate`) before anything is looked up on
    /// the file workers that uploads share: a real file or a made-up id alike.
    @Test func downloadsArePacedPerAddress() throws {
        let server = try startTestServer { $0.downloadRatePerSecond = 1; $0.downloadBurst = 2 }
        defer { server.shutdown() }
        let file = try server.uploaded(FileFixtures.pdf, name: "a.pdf", type: "application/pdf")
        let id = try #require(file["id"]?.stringValue)
        #expect(try fileRequest(port: server.httpPort, "GET", "/demo/files/\(id)").status == 200)
        #expect(try fileRequest(port: server.httpPort, "HEAD", "/demo/files/\(id)").status == 200)
        for target in ["/demo/files/\(id)", "/demo/files/\(UploadRegistry.makeID())"] {
            let refused = try fileRequest(port: server.httpPort, "GET", target)
            #expect(refused.status == 429 && refused.header("Retry-After") != nil, "\(refused.status)")
            #expect(refused.text == "too many downloads (limit 1 per second per address); slow down\n")
        }
        let metrics = try httpRequest(port: server.httpPort, "GET", "/metrics")
        #expect(metrics.body.contains("parley_limit_breaches_total{limit=\"download_rate\"} 2\n"))
        // Other requests are not charged: REST has its own rate.
        #expect(try httpRequest(port: server.httpPort, "GET", "/healthz").status == 200)
    }

    @Test func forgedAndForeignIdsAreRefused() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let elsewhere = try server.uploaded(FileFixtures.pdf, name: "a.pdf", type: "application/pdf", channel: "other")
        let foreignID = try #require(elsewhere["id"]?.stringValue)
        let alice = try await NativeClient.connect(server)
        for (body, why) in [
            (["attachments": [.string(foreignID)]], "issued in another channel"),
            (["attachments": [.string(UploadRegistry.makeID())]], "never issued"),
            (["attachments": [["id": "../../etc/passwd"]]], "not an id"),
            (["attachments": []], "empty"),
            (["text": 3, "attachments": [.string(foreignID)]], "caption not text"),
        ] as [(JSONValue, String)] {
            let reply = try await alice.publishAcknowledged(body, to: "room")
            #expect(reply["error"] != nil, "\(why): \(reply)")
        }
        let rest = try await httpRequest(port: server.httpPort, "POST", "/demo/room/publish",
                                         json: #"{"attachments":["\#(foreignID)"]}"#)
        #expect(rest.status == 400 && rest.body.contains("unknown attachment"))
        // Nothing was stored.
        #expect(try await alice.history("room", limit: 10)["messages"] == [])
        // Plain bodies, even objects, are untouched.
        #expect(try await alice.publishAcknowledged(["text": "hi", "attachmentsNote": "none"], to: "room")["error"] == nil)
    }

    /// The server rewrites `attachments`; a body naming it twice would keep the first, forged
    /// copy beside the server's (readers differ on which one counts). Both doors that rewrite
    /// refuse it, saying why, and nothing is stored.
    @Test func aRepeatedKeyInAnAttachmentMessageIsRefused() async throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let report = try server.uploaded(FileFixtures.pdf, name: "report.pdf", type: "application/pdf")
        let id = try #require(report["id"]?.stringValue)
        let forged: JSONValue = [["id": .string(id), "name": "evil.exe", "url": "http://evil.example/x", "size": 45,
                                  "mime": "application/pdf", "kind": "file"]]
        let alice = try await NativeClient.connect(server)
        let reply = try await alice.publishAcknowledged(.object(JSONObject([("attachments", forged), ("attachments", [.string(id)])])), to: "room")
        #expect(reply["error"]?.stringValue?.contains("\"attachments\" appears more than once") == true, "\(reply)")
        let rest = try await httpRequest(port: server.httpPort, "POST", "/demo/room/publish",
                                         json: #"{"attachments":[{"id":"\#(id)","url":"http://evil.example/x"}],"attachments":["\#(id)"]}"#)
        #expect(rest.status == 400 && rest.body.contains("\"attachments\" appears more than once"), "\(rest)")
        #expect(try await alice.history("room", limit: 10)["messages"] == [])
    }

    @Test func publishesKeepTheirOrderBehindAnAttachmentCheck() throws {
        let server = try startTestServer()
        defer { server.shutdown() }
        let file = try server.uploaded(FileFixtures.pdf, name: "a.pdf", type: "application/pdf")
        let id = try #require(file["id"]?.stringValue)
        let alice = try NativeClient.connect(server)
        _ = try alice.subscribe("order")
        // Sent back to back: the plain ones must not overtake the one being checked.
        try alice.publish(["text": "1", "attachments": [.string(id)]], to: "order")
        try alice.publish("2", to: "order")
        try alice.publish(["text": "3", "attachments": [.string(id)]], to: "order")
        try alice.publish("4", to: "order")
        var seen: [String] = []
        while seen.count < 4 {
            let message = try alice.next { $0["type"] == "publish" }["message"]
            seen.append(message?.stringValue ?? message?["text"]?.stringValue ?? "?")
        }
        #expect(seen == ["1", "2", "3", "4"])
    }
}
