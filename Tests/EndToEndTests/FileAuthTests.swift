import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// On a channel that requires auth, uploads need the publish credentials and downloads the
/// read credentials: the JWT (header, or `?token=`), or the channel's secret.
@Suite(.serialized) struct FileAuthTests {
    static func bearer(_ token: String) -> (String, String) { ("Authorization", "Bearer \(token)") }
    static let basic = ("Authorization", "Basic " + Data("acme:\(AuthFixtures.secret)".utf8).base64EncodedString())

    @Test func uploadsNeedThePublishPermissionInTheNamedRoom() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let pdf = FileFixtures.pdf
        let writer = AuthFixtures.jwt(AuthFixtures.payload(client: nil, permissions: [
            "^team$": ["publish": true, "subscribe": true], "^readonly$": ["publish": false, "subscribe": true]]))

        let anonymous = try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", room: "team")
        #expect(anonymous.status == 401 && anonymous.header("WWW-Authenticate") != nil && !anonymous.text.isEmpty)
        let noRoom = try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", headers: [Self.bearer(writer)])
        #expect(noRoom.status == 400 && noRoom.text.contains("?room="))
        let readOnly = try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", room: "readonly",
                                         headers: [Self.bearer(writer)])
        #expect(readOnly.status == 403)
        let forged = AuthFixtures.jwt(AuthFixtures.payload(client: nil), secret: "wrong")
        #expect(try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", room: "team",
                                  headers: [Self.bearer(forged)]).status == 401)
        let expired = AuthFixtures.jwt(AuthFixtures.payload(client: nil, exp: AuthFixtures.nowSeconds - 10))
        #expect(try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", room: "team",
                                  headers: [Self.bearer(expired)]).status == 401)
        // A refused upload stores nothing.
        #expect(try FileManager.default.contentsOfDirectory(atPath: server.configuration.dataDirectory + "/files/tmp").isEmpty)

        #expect(try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", room: "team",
                                  headers: [Self.bearer(writer)]).status == 201)
        // The backend's secret may upload anywhere.
        #expect(try server.upload(pdf, name: "a.pdf", type: "application/pdf", channel: "acme", headers: [Self.basic]).status == 201)
    }

    @Test func downloadsNeedTheReadPermissionWhereTheFileWasShared() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let writer = AuthFixtures.jwt(AuthFixtures.payload(client: nil, permissions: [".*": ["publish": true, "subscribe": true]]))
        let attachment = try server.uploaded(FileFixtures.pdf, name: "plan.pdf", type: "application/pdf", channel: "acme",
                                             room: "team", headers: [Self.bearer(writer)])
        let url = try #require(attachment["url"]?.stringValue)
        let reader = AuthFixtures.jwt(AuthFixtures.payload(client: nil, permissions: ["^team$": ["subscribe": true]]))
        let historian = AuthFixtures.jwt(AuthFixtures.payload(client: nil, permissions: ["^team$": ["history": 10]]))
        let outsider = AuthFixtures.jwt(AuthFixtures.payload(client: nil, permissions: ["^other$": ["subscribe": true]]))

        let anonymous = try server.download(url)
        #expect(anonymous.status == 401 && anonymous.text.contains("Bearer"))
        #expect(try server.download(url, headers: [Self.bearer(reader)]).body == FileFixtures.pdf)
        #expect(try server.download(url, headers: [Self.bearer(historian)]).status == 200)
        // Where a header cannot be set (an <img>): the token in the query.
        #expect(try server.download(url + "?token=" + reader).status == 200)
        #expect(try server.download(url, headers: [Self.basic]).status == 200)
        #expect(try server.download(url, headers: [Self.bearer(outsider)]).status == 403)
        let expired = AuthFixtures.jwt(AuthFixtures.payload(client: nil, exp: AuthFixtures.nowSeconds - 10,
                                                            permissions: ["^team$": ["subscribe": true]]))
        #expect(try server.download(url, headers: [Self.bearer(expired)]).status == 401)
        #expect(try server.download(url + "?token=garbage").status == 401)

        // Once published in another room, that room's readers may download it too.
        let client = try NativeClient.connect(server, channel: "acme")
        let token = AuthFixtures.jwt(AuthFixtures.payload(client: client.clientID))
        #expect(try client.authenticate(token)["error"] == nil)
        #expect(try client.publishAcknowledged(["attachments": [try #require(attachment["id"])]], to: "other")["error"] == nil)
        try eventuallyBlocking("the outsider's room now holds the file", timeout: 10) {
            try server.download(url, headers: [Self.bearer(outsider)]).status == 200
        }
    }

    /// A file shared in a direct room is its users' alone: a token whose patterns match every
    /// direct room neither uploads into nor downloads from one it is not a user of.
    @Test func aDirectRoomsFilesAreItsUsersAlone() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        func token(_ user: String) -> String {
            guard case .object(var payload) = AuthFixtures.payload(client: nil, permissions: ["^dm\\+.*": ["publish": true, "subscribe": true]])
            else { return "" }
            payload["user"] = .string(user)
            return AuthFixtures.jwt(.object(payload))
        }
        let attachment = try server.uploaded(FileFixtures.pdf, name: "plan.pdf", type: "application/pdf", channel: "acme",
                                             room: "dm+alice+bob", headers: [Self.bearer(token("alice"))])
        let url = try #require(attachment["url"]?.stringValue)
        #expect(try server.download(url, headers: [Self.bearer(token("bob"))]).status == 200)
        let mallory = try server.download(url, headers: [Self.bearer(token("mallory"))])
        #expect(mallory.status == 403, "\(mallory.status)")
        #expect(try server.download(url + "?token=" + token("mallory")).status == 403)
        let upload = try server.upload(FileFixtures.pdf, name: "x.pdf", type: "application/pdf", channel: "acme", room: "dm+alice+bob",
                                       headers: [Self.bearer(token("mallory"))])
        #expect(upload.status == 403, "\(upload.status) \(upload.text)")
    }

    @Test func openChannelsNeedNothing() throws {
        let server = try startAuthServer()
        defer { server.shutdown() }
        let attachment = try server.uploaded(FileFixtures.pdf, name: "a.pdf", type: "application/pdf", channel: "open-acme")
        #expect(try server.download(try #require(attachment["url"]?.stringValue)).status == 200)
        // Credentials that are sent are checked all the same.
        #expect(try server.upload(FileFixtures.pdf, name: "a.pdf", type: "application/pdf", channel: "open-acme",
                                  headers: [("Authorization", "Basic " + Data("open-acme:nope".utf8).base64EncodedString())]).status == 401)
        // A channel this server does not open has no files.
        let closed = try startAuthServer(openChannels: false)
        defer { closed.shutdown() }
        #expect(try closed.upload(FileFixtures.pdf, name: "a.pdf", type: "application/pdf", channel: "unknown").status == 404)
    }
}

extension NativeClient {
    /// Blocking `authenticate` (the async one is in AuthTestSupport.swift).
    func authenticate(_ token: String) throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "authenticate", "token": .string(token), "callback": .number(JSONNumber(callback))])
        return try next { $0["callback"]?.intValue == callback }
    }
}
