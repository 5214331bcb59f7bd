import Testing
@testable import ParleyServer

@Suite struct ClientIDTests {
    /// A native client id: ten random letters or digits, then the connection id in base 36
    /// (unique on this node even if two random prefixes met).
    @Test func clientIDsAreRandomPrefixesOverTheConnectionID() {
        var seen = Set<String>()
        var prefixes = Set<String>()
        for connection in UInt64(1)...2_000 {
            let id = NativeSession.makeClientID(connectionID: connection)
            let prefix = id.prefix(10), suffix = id.dropFirst(10)
            #expect(prefix.count == 10 && prefix.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
            #expect(suffix == String(connection, radix: 36))
            seen.insert(id)
            prefixes.insert(String(prefix))
        }
        #expect(seen.count == 2_000)
        // 62^10 possible prefixes: a repeat among 2,000 would mean the randomness is broken.
        #expect(prefixes.count == 2_000)
        // Every character of the alphabet turns up (not, say, only the first few).
        #expect(Set(prefixes.joined()).count == 62)
    }
}
