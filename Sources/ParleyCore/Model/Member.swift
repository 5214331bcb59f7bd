/// One connection's identity in a room.
public struct Member: Hashable, Sendable {
    /// The connection's client id (a string, as Scaledrone clients expect).
    public let id: String
    /// What the client said about itself at handshake, kept as the exact JSON it sent.
    public let clientData: JSONValue?
    /// What a verified token said about the client (set by authentication).
    public let authData: JSONValue?
    /// The user this connection belongs to, when it is not a user of its own
    /// (docs/protocols.md, "Users"): from a token's `user` claim, the handshake's `user_id` in
    /// an open channel, or the name a line or Socket.IO client chose.
    public let userID: String?

    public init(id: String, clientData: JSONValue? = nil, authData: JSONValue? = nil, userID: String? = nil) {
        self.id = id
        self.clientData = clientData
        self.authData = authData
        self.userID = userID
    }

    /// The member's user: ``userID``, or the member id for a connection that is its own user.
    public var user: String { userID ?? id }

    /// The name people see: `clientData.name` when it is a non-empty string, else the id.
    public var displayName: String {
        if let name = clientData?["name"]?.stringValue, !name.isEmpty { return name }
        return id
    }
}
