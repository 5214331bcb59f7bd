/// Who is typing in a room. A typing flag expires on its own after `timeoutMillis`, so a
/// client that vanishes mid-sentence does not type forever.
public struct TypingTracker: Sendable {
    public let timeoutMillis: Int64
    /// Member id → when the flag expires; in the order they started typing.
    private var typists: [(id: String, member: Member, expires: Int64)] = []

    public init(timeoutMillis: Int64 = 6_000) {
        self.timeoutMillis = timeoutMillis
    }

    /// Records a flag; returns true when it changes who is typing.
    public mutating func set(_ member: Member, typing: Bool, nowMillis: Int64) -> Bool {
        if let index = typists.firstIndex(where: { $0.id == member.id }) {
            if typing {
                typists[index].expires = nowMillis + timeoutMillis
                return false
            }
            typists.remove(at: index)
            return true
        }
        guard typing else { return false }
        typists.append((member.id, member, nowMillis + timeoutMillis))
        return true
    }

    /// Clears a member (e.g. it sent a message or left); returns true when it was typing.
    public mutating func clear(_ memberID: String) -> Bool {
        guard let index = typists.firstIndex(where: { $0.id == memberID }) else { return false }
        typists.remove(at: index)
        return true
    }

    /// Removes and returns the members whose flag has expired.
    public mutating func expire(nowMillis: Int64) -> [Member] {
        let expired = typists.filter { $0.expires <= nowMillis }.map(\.member)
        if !expired.isEmpty { typists.removeAll { $0.expires <= nowMillis } }
        return expired
    }

    /// Members typing now, in the order they started.
    public var members: [Member] { typists.map(\.member) }
}
