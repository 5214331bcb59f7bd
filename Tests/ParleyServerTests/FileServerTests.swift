import Foundation
import ParleyCore
import ParleyIO
@testable import ParleyServer
import Testing

/// The server's side of attachments that needs no socket: how doors render them, what a
/// publish body must look like, and the limits' flags, variables and config keys.
@Suite struct FileServerTests {
    let photo = Attachment(id: String(repeating: "a", count: 32), url: "http://h:8080/demo/files/" + String(repeating: "a", count: 32),
                           name: "cat.jpg", mime: "image/jpeg", size: 1_234_567, width: 4032, height: 3024,
                           thumbnail: .init(url: "http://h:8080/demo/files/\(String(repeating: "a", count: 32))/thumbnail", width: 480, height: 360))
    let pdf = Attachment(id: String(repeating: "b", count: 32), url: "http://h:8080/demo/files/" + String(repeating: "b", count: 32),
                         name: "report.pdf", mime: "application/pdf", size: 52_000)

    func message(_ body: JSONValue, from name: String = "alice") -> RoomEvent {
        .message(Message(id: "m1", offset: 1, timestampMillis: 1_700_000_000_000, room: RoomKey(channel: "demo", room: "r"),
                         sender: Member(id: "c1", clientData: ["name": .string(name)]), body: body))
    }

    func text(_ buffer: IOBuffer?) -> String? {
        buffer.map { String(decoding: $0.bytes, as: UTF8.self) }
    }

    @Test func theLineDoorShowsTheCaptionThenOneLinePerFile() {
        let body = AttachmentMessage(text: "look\nhere", attachments: [photo, pdf]).jsonValue
        #expect(text(LineEncoding.encode(message(body))) == """
            alice:look here
            alice:[image cat.jpg 1.2 MB] \(photo.url)
            alice:[file report.pdf 52 KB] \(pdf.url)

            """)
        let bare = AttachmentMessage(attachments: [pdf]).jsonValue
        #expect(text(LineEncoding.encode(message(bare, from: "b\nob"))) == "b ob:[file report.pdf 52 KB] \(pdf.url)\n")
        // Other JSON is unchanged.
        #expect(text(LineEncoding.encode(message(["attachments": "nope"]))) == #"alice:{"attachments":"nope"}"# + "\n")
    }

    @Test func socketChatGetsOneStringWithKindsAndURLs() {
        let body = AttachmentMessage(text: "look", attachments: [photo, pdf]).jsonValue
        #expect(SocketChatEncoding.text(of: body) == "look [image] \(photo.url) [file] \(pdf.url)")
        let events = SocketChatEncoding.events(for: message(body), users: [], typing: [])
        let chat = events.first { $0.name == "newChatMessage" }
        #expect(chat?.arguments.count == 3)
        #expect(chat?.arguments[0] == "alice")
        #expect(chat?.arguments[1].stringValue == "look [image] \(photo.url) [file] \(pdf.url)")
        #expect(SocketChatEncoding.text(of: AttachmentMessage(attachments: [pdf]).jsonValue) == "[file] \(pdf.url)")
    }

    @Test func publishBodiesNameUploadsByID() {
        let id = String(repeating: "c", count: 32)
        #expect(AttachmentBody.inspect("text") == .plain)
        #expect(AttachmentBody.inspect(["text": "hi", "note": 1]) == .plain)
        #expect(AttachmentBody.inspect(["attachments": [.string(id)]]) == .references([id]))
        #expect(AttachmentBody.inspect(["text": "x", "attachments": [["id": .string(id), "name": "ignored"], .string(id)]])
                == .references([id, id]))
        for bad: JSONValue in [
            ["attachments": []], ["attachments": "x"], ["attachments": [1]], ["attachments": [["name": "no id"]]],
            ["attachments": ["../etc/passwd"]], ["attachments": [.string(id.uppercased())]],
            ["text": 1, "attachments": [.string(id)]],
            ["attachments": .array(Array(repeating: .string(id), count: 11))],
            // A repeated key: a forged first `attachments` would stay beside the server's.
            .object(JSONObject([("attachments", [["id": .string(id), "url": "http://evil.example/x"]]), ("attachments", [.string(id)])])),
            .object(JSONObject([("text", "a"), ("attachments", [.string(id)]), ("text", "b")])),
        ] {
            guard case .invalid(let error) = AttachmentBody.inspect(bad) else {
                Issue.record("accepted \(bad)")
                continue
            }
            #expect(error.code == .badRequest)
        }
    }

    @Test func limitsAreFlagsVariablesAndConfigKeys() throws {
        let flags = try #require(try ServerConfiguration.parse(arguments: [
            "--files", "/srv/files", "--public-url", "https://chat.example.com/", "--max-upload-size", "5000000",
            "--upload-types", "image/*, application/PDF", "--upload-rate", "5", "--files-quota", "123456",
            "--upload-grace", "3600", "--file-workers", "4"], environment: [:]))
        #expect(flags.filesDirectory == "/srv/files")
        #expect(flags.publicURL == "https://chat.example.com")
        #expect(flags.uploadMaxBytes == 5_000_000 && flags.uploadsPerMinute == 5 && flags.filesQuotaBytes == 123_456)
        #expect(flags.uploadTypes == ["image/*", "application/pdf"])
        #expect(flags.uploadGraceSeconds == 3600 && flags.fileWorkers == 4)
        let environment = try #require(try ServerConfiguration.parse(arguments: [], environment: [
            "PARLEY_MAX_UPLOAD_SIZE": "777", "PARLEY_UPLOAD_RATE": "9", "PARLEY_FILES_QUOTA": "1000", "PARLEY_FILES": "/x"]))
        #expect(environment.uploadMaxBytes == 777 && environment.uploadsPerMinute == 9)
        #expect(environment.filesQuotaBytes == 1000 && environment.filesDirectory == "/x")
        for bad in [["--public-url", "ftp://x"], ["--public-url", "http://x/path"], ["--upload-types", "png"],
                    ["--upload-types", "*/*"], ["--max-upload-size", "0"], ["--upload-rate", "-1"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ServerConfiguration.parse(arguments: bad, environment: [:]) }
        }

        var configuration = ServerConfiguration()
        try ConfigFile.apply(Array("""
            {"limits": {"maxUploadBytes": 2000000, "uploadsPerMinute": 12, "filesQuotaBytes": 99, "uploadTypes": ["text/*"]},
             "files": {"directory": "/shared", "publicURL": "http://lb:80", "uploadGraceSeconds": 60,
                       "collectIntervalSeconds": 30, "uploadTimeoutMillis": 5000, "workers": 3},
             "channels": [{"id": "acme", "limits": {"maxUploadBytes": 1000, "uploadTypes": ["image/png"],
                                                    "uploadsPerMinute": 2, "filesQuotaBytes": 5000}}]}
            """.utf8), name: "parley.json", to: &configuration)
        #expect(configuration.uploadMaxBytes == 2_000_000 && configuration.uploadsPerMinute == 12)
        #expect(configuration.filesQuotaBytes == 99 && configuration.uploadTypes == ["text/*"])
        #expect(configuration.filesDirectory == "/shared" && configuration.publicURL == "http://lb:80")
        #expect(configuration.uploadGraceSeconds == 60 && configuration.filesCollectIntervalSeconds == 30)
        #expect(configuration.uploadTimeoutMillis == 5000 && configuration.fileWorkers == 3)
        let acme = try #require(configuration.settings(ofChannel: "acme"))
        #expect(acme.uploadMaxBytes == 1000 && acme.uploadTypes == ["image/png"])
        #expect(acme.uploadsPerMinute == 2 && acme.filesQuotaBytes == 5000)
        let limits = ChannelFileLimits(configuration, acme)
        #expect(limits.maxBytes == 1000 && limits.policy.allows("image/png") && !limits.policy.allows("text/plain"))
        let defaults = ChannelFileLimits(configuration, nil)
        #expect(defaults.maxBytes == 2_000_000 && defaults.policy.allows("text/csv") && !defaults.policy.allows("image/png"))

        for bad in [#"{"files": {"publicURL": "nope"}}"#, #"{"limits": {"uploadTypes": "image/*"}}"#,
                    #"{"files": {"bogus": 1}}"#, #"{"channels": [{"id": "a", "limits": {"maxUploadBytes": 0}}]}"#] {
            var c = ServerConfiguration()
            #expect(throws: ServerConfiguration.UsageError.self, "\(bad)") { try ConfigFile.apply(Array(bad.utf8), name: "p", to: &c) }
        }
    }
}
