import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport
import Testing

/// Message actions on the line door (docs/protocols.md §3): how replies, edits, deletes and
/// reactions read there, and the short commands `reply:`, `react:`, `unreact:`, `edit:`.
@Suite(.serialized) struct LineActionTests {
    @Test func lineUsersReplyReactAndEditAndSeeEachOther() async throws {
        let server = try TestServer.start()
        defer { server.stop() }
        let alice = try server.lineClient(name: "alice")
        let bob = try server.lineClient(name: "bob")
        _ = try alice.readLine(until: { $0 == "bob has joined" })
        try alice.send("reply:too early\n")
        #expect(try alice.readLine() == "error: no message to reply to")
        try alice.send("edit:nothing yet\n")
        #expect(try alice.readLine() == "error: you have no message to edit here")

        try alice.send("msg:hello everyone, this is a long first line\n")
        for client in [alice, bob] { #expect(try client.readLine() == "alice:hello everyone, this is a long first line") }
        let quoted = #""hello everyone, this is a long…""#
        try bob.send("reply:hi alice\n")
        for client in [alice, bob] { #expect(try client.readLine() == "bob (reply to alice: \(quoted)):hi alice") }
        try bob.send("react: 👍 \n")
        for client in [alice, bob] { #expect(try client.readLine() == "bob reacted 👍 to \(quoted)") }
        try bob.send("react:👍\n")
        #expect(try bob.readLine().hasPrefix("error: react: you already reacted 👍"))   // the session's rule
        try bob.send("unreact:👍\n")
        for client in [alice, bob] { #expect(try client.readLine() == "bob took back 👍 on \(quoted)") }
        // Alice fixes her own last message; what quotes it follows.
        try alice.send("edit:hello all\n")
        for client in [alice, bob] { #expect(try client.readLine() == "alice (edited):hello all") }
        try bob.send("react:🎉\n")
        for client in [alice, bob] { #expect(try client.readLine() == #"bob reacted 🎉 to "hello all""#) }
        // "The last message of someone else" is, for alice, bob's reply.
        try alice.send("react:❤️\n")
        for client in [alice, bob] { #expect(try client.readLine() == #"alice reacted ❤️ to "hi alice""#) }
        try alice.send("react:\n")
        #expect(try alice.readLine() == "error: react needs an emoji, e.g. react:👍")

        // A native member deletes its message: told with what it was.
        let nina = try await NativeClient.connect(server.server, clientData: ["name": "nina"])
        try nina.send(["type": "subscribe", "room": .string(server.lobby.room), "callback": 1])
        _ = try await nina.next(where: { $0["callback"] == 1 })
        try nina.send(["type": "publish", "room": .string(server.lobby.room), "message": "oops", "callback": 2])
        let sent = try await nina.next(where: { $0["callback"] == 2 })
        _ = try alice.readLine(until: { $0 == "nina:oops" })
        try nina.send(["type": "delete", "room": .string(server.lobby.room), "target": sent["id"] ?? .null, "callback": 3])
        #expect(try alice.readLine(until: { $0.hasPrefix("nina ") }) == #"nina deleted "oops""#)

        // A joiner's history shows replies with their quote too, in the current state.
        let carol = try TestSocket(port: server.server.linePort)
        try carol.send("iam:carol\n")
        #expect(try carol.readLine() == "alice:hello all")
        #expect(try carol.readLine() == #"bob (reply to alice: "hello all"):hi alice"#)
        _ = try carol.readLine(until: { $0 == "carol has joined" })
        try carol.send("edit:x\n")
        #expect(try carol.readLine() == "error: you have no message to edit here")
    }

    @Test func theCommandsParse() {
        #expect(LineCommand.parse(Array("reply:a: b\r".utf8)) == .reply("a: b"))
        #expect(LineCommand.parse(Array("react: 👍".utf8)) == .react("👍"))
        #expect(LineCommand.parse(Array("unreact:👍 ".utf8)) == .unreact("👍"))
        #expect(LineCommand.parse(Array("edit: fixed".utf8)) == .edit(" fixed"))
        #expect(LineCommand.parse(Array("Edit:x".utf8)) == .unknown("Edit:x"))
    }
}
