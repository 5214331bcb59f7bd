/// Which of a server's doors the bench speaks.
public enum BenchDoor: String, Sendable, CaseIterable {
    /// Scaledrone v3 JSON over WebSocket (`/v3/websocket`).
    case native
    /// Socket.IO v4 (Engine.IO 4 over WebSocket, `/socket.io/`), SocketChat events.
    case socketio
    /// Parley's line protocol over plain TCP (`iam:`/`msg:`).
    case line
}

/// A parsed `ws://`, `http://` or `tcp://` URL with a numeric host.
public struct BenchURL: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// Request target for WebSocket doors ("" when the URL had no path).
    public var path: String

    public init(host: String, port: Int, path: String = "") {
        self.host = host
        self.port = port
        self.path = path
    }

    public init?(parsing text: String) {
        var rest = Substring(text)
        var defaultPort = 80
        for (scheme, port) in [("ws://", 80), ("http://", 80), ("tcp://", 8081)] where rest.hasPrefix(scheme) {
            rest = rest.dropFirst(scheme.count)
            defaultPort = port
        }
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        path = String(rest[slash...])
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            port = after.hasPrefix(":") ? (Int(after.dropFirst()) ?? -1) : defaultPort
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            port = Int(authority[authority.index(after: colon)...]) ?? -1
        } else {
            host = String(authority)
            port = defaultPort
        }
        if host == "localhost" { host = "127.0.0.1" }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
    }

    /// `Host:` header value.
    var hostHeader: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// How fast publishers send.
public enum BenchRate: Sendable, Equatable {
    /// Open loop: this many messages per second in total, spread evenly over the publishers.
    case perSecond(Double)
    /// Closed loop: each publisher keeps at most `window` of its messages in flight.
    case max
}

/// Everything `parley bench fanout` can be told.
public struct FanoutOptions: Sendable {
    /// The servers (`--url`, repeatable): members are spread over them round robin and every
    /// publisher is on the first, so with cluster nodes a message crosses Redis to reach the
    /// others. One URL is the single-server scenario.
    public var urls = [BenchURL(host: "127.0.0.1", port: 8080, path: "/v3/websocket")]
    /// The first (or only) server.
    public var url: BenchURL {
        get { urls[0] }
        set { urls = [newValue] }
    }
    public var door = BenchDoor.native
    public var rooms = 1
    public var members = 10
    public var publishers = 1
    public var rate = BenchRate.perSecond(100)
    public var window = 64
    /// Socket.IO: listening members send `connectUser` too (`--sio-identify all`, the
    /// default) or only publishers do (`--sio-identify publishers`, for servers that emit to
    /// every socket, like the original SocketChat server and Parley since its listeners).
    public var identifySocketIOMembers = true
    public var size = 100
    public var durationSeconds = 10.0
    public var warmupSeconds = 1.0
    public var loops = 2
    public var json = false
    /// Channel for the native handshake.
    public var channel = "bench"
    /// Connections being set up at once per loop.
    public var connectConcurrency = 128
    /// How long to wait after publishing stops for the last messages to land.
    public var drainSeconds = 5.0
    /// How long connecting and subscribing everyone may take.
    public var setupTimeoutSeconds = 120.0
    /// Server processes whose CPU time (user + system) is read at the start and end of the
    /// measured window, for deliveries per server CPU-second; with several (cluster nodes)
    /// their CPU time is summed.
    public var serverPIDs: [Int32] = []

    public init() {}

    var totalConnections: Int { rooms * members }

    /// Which server connection `index` goes to: publishers to the first, everyone else round
    /// robin.
    func urlIndex(connection index: Int, isPublisher: Bool) -> Int {
        isPublisher ? 0 : index % urls.count
    }
}

/// Everything `parley bench idle` can be told.
public struct IdleOptions: Sendable {
    /// The servers (`--url`, repeatable): connections are spread over them round robin.
    public var urls = [BenchURL(host: "127.0.0.1", port: 8080, path: "/v3/websocket")]
    /// The first (or only) server.
    public var url: BenchURL {
        get { urls[0] }
        set { urls = [newValue] }
    }
    public var connections = 1000
    /// Server processes whose resident memory is read (`--server-pid`, repeatable): the
    /// checkpoints report their sum, so several cluster nodes are measured together.
    public var serverPIDs: [Int32] = []
    /// The first (or only) server process.
    public var serverPID: Int32? {
        get { serverPIDs.first }
        set { serverPIDs = newValue.map { [$0] } ?? [] }
    }
    /// Connection counts at which to read the server's memory (the final count is always one).
    public var reportAt: [Int] = [5_000, 10_000, 19_000]
    /// Connections per source address before moving to the next 127.0.0.x.
    public var perAddress = 25_000
    public var holdSeconds = 0.0
    public var loops = 2
    public var json = false
    public var channel = "bench"
    public var room = "idle"
    public var connectConcurrency = 256
    public var setupTimeoutSeconds = 300.0

    public init() {}
}
