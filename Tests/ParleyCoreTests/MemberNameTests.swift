import ParleyCore
import Testing

/// The one name rule of every door (ParleyCore/Model/MemberName.swift).
struct MemberNameTests {
    @Test(arguments: ["Luke", "zoë", "a b", "👩‍👩‍👧‍👦 family", "日本語", "tab\there", String(repeating: "a", count: 64),
                      "שלום", "e\u{301}"])
    func acceptsOrdinaryNames(_ name: String) {
        #expect(MemberName.problem(with: name) == nil, "\(name.debugDescription)")
    }

    @Test(arguments: [
        "", " ", "\t \u{3000}",                                   // empty or whitespace only
        String(repeating: "a", count: 65),                          // too many characters
        "a" + String(repeating: "\u{301}", count: 200),             // one character, 401 bytes
        "\u{1B}[2Jboss", "bell\u{7}", "nul\u{0}", "del\u{7F}",      // C0 and DEL
        "c1\u{9B}31m", "nel\u{85}",                                 // C1 (CSI, NEL)
        "admin\u{202E}txt.exe", "a\u{202A}b", "a\u{2066}b", "a\u{2069}",  // bidi overrides and isolates
        "line\u{2028}break", "para\u{2029}",                        // separators
        "new\nline", "carriage\rreturn",
        "bad\u{FFFD}utf8",                                          // what invalid UTF-8 decodes to
    ])
    func refusesNamesThatHideOrMoveText(_ name: String) {
        #expect(MemberName.problem(with: name)?.code == .badRequest, "\(name.debugDescription)")
    }

    @Test func socketChatNicknamesFollowTheSameRule() {
        #expect(SocketChatRoster.isValidNickname("Luke"))
        #expect(!SocketChatRoster.isValidNickname("a\u{202E}b"))
        #expect(!SocketChatRoster.isValidNickname("   "))
    }

    @Test func clientDataNameMustPassWhenItIsAString() {
        #expect(MemberName.problem(withClientData: ["name": "alice", "color": "#ff0000"], maxBytes: 4096) == nil)
        #expect(MemberName.problem(withClientData: ["name": 42], maxBytes: 4096) == nil)
        #expect(MemberName.problem(withClientData: "just a string", maxBytes: 4096) == nil)
        let bad = MemberName.problem(withClientData: ["name": "\u{1B}]0;owned\u{7}"], maxBytes: 4096)
        #expect(bad?.code == .badRequest && bad?.message.hasPrefix("client_data.name:") == true)
    }

    @Test func clientDataIsBoundedInEncodedBytes() {
        let big: JSONValue = ["name": "a", "blob": .string(String(repeating: "x", count: 5000))]
        #expect(MemberName.problem(withClientData: big, maxBytes: 4096)?.code == .tooLarge)
        #expect(MemberName.problem(withClientData: big, maxBytes: 8192) == nil)
        // Escapes count as sent: 1000 quotes are 2000 bytes of JSON.
        #expect(MemberName.problem(withClientData: .string(String(repeating: "\"", count: 1000)), maxBytes: 1500)?.code == .tooLarge)
    }
}
