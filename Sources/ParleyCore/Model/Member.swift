/// One connection's identity in a room.
public struct Member: Hashable, Sendable {
    /// The connection's client id (a string, as Scaledrone clients expect).
    public let id: String
    /// What the client said about itself at handshake, kept as the exact JSON it sent.
    public let clientData: JSONValue?
    /// What a verified token said about the client (set by authentication).
    public let authData: JSONValue?

    public init(id: String, clientData: JSONValue? = nil, authData: JSONValue? = nil) {
        self.id = id
        self.clientData = clientData
        self.authData = authData
    }

    /// The name people see: `clientData.name` when it is a non-empty string, else the id.
    public var displayName: String {
        if let name = clientData?["name"]?.stringValue, !name.isEmpty { return name }
        return id
    }
}
