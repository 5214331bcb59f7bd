extension ServerConfiguration {
    /// The Socket.IO door's flags (heartbeat, connect timeout, polling sessions) and its
    /// diagnostic endpoints.
    static let socketIOOptions: [Option] = [
        Option(flag: "--socketio-ping-interval", env: "PARLEY_SOCKETIO_PING_INTERVAL", value: "MS", help: "Engine.IO ping interval in milliseconds (default 25000)") { c, v throws(UsageError) in
            c.socketIOPingIntervalMillis = try socketIOMillis(v, "--socketio-ping-interval")
        },
        Option(flag: "--socketio-ping-timeout", env: "PARLEY_SOCKETIO_PING_TIMEOUT", value: "MS", help: "Engine.IO ping timeout in milliseconds (default 20000)") { c, v throws(UsageError) in
            c.socketIOPingTimeoutMillis = try socketIOMillis(v, "--socketio-ping-timeout")
        },
        Option(flag: "--socketio-connect-timeout", env: "PARLEY_SOCKETIO_CONNECT_TIMEOUT", value: "MS", help: "close a Socket.IO connection with no namespace connected after this long (default 45000)") { c, v throws(UsageError) in
            c.socketIOConnectTimeoutMillis = try socketIOMillis(v, "--socketio-connect-timeout")
        },
        Option(flag: "--socketio-max-polling-sessions", env: "PARLEY_SOCKETIO_MAX_POLLING_SESSIONS", value: "N", help: "Socket.IO long-polling sessions open at once (default 10000)") { c, v throws(UsageError) in
            guard let n = Int(v), (1...10_000_000).contains(n) else {
                throw UsageError(description: "--socketio-max-polling-sessions must be a whole number in 1...10000000, got \"\(v)\"")
            }
            c.socketIOMaxPollingSessions = n
        },
        Option(flag: "--socketio-polling-rate", env: "PARLEY_SOCKETIO_POLLING_RATE", value: "N", help: "Socket.IO long-polling requests per second per IP (default 200, burst 2x; 429 above)") { c, v throws(UsageError) in
            guard let n = Int(v), (1...10_000_000).contains(n) else {
                throw UsageError(description: "--socketio-polling-rate must be a whole number in 1...10000000, got \"\(v)\"")
            }
            c.socketIOPollingRatePerSecond = Double(n)
        },
        Option(flag: "--eio-echo-path", env: "PARLEY_EIO_ECHO_PATH", value: "PATH", help: "serve a diagnostic Engine.IO 4 echo server at PATH (default off)") { c, v throws(UsageError) in
            guard v.hasPrefix("/"), !v.contains("?"), !v.contains(" ") else {
                throw UsageError(description: "--eio-echo-path must be a path starting with /, got \"\(v)\"")
            }
            guard v != "/socket.io/", v != "/socket.io" else {
                throw UsageError(description: "--eio-echo-path cannot be /socket.io/ (the Socket.IO door is there)")
            }
            c.engineIOEchoPath = v
        },
        Option(flag: "--sio-test-app", env: "PARLEY_SIO_TEST_APP", value: "", help: "serve the Socket.IO protocol's test application on /socket.io/ instead of SocketChat (diagnostic)") { c, v throws(UsageError) in
            switch v {
            case "", "1", "true", "yes": c.socketIOTestApp = true
            case "0", "false", "no": c.socketIOTestApp = false
            default: throw UsageError(description: "--sio-test-app takes no value (PARLEY_SIO_TEST_APP=1 or 0), got \"\(v)\"")
            }
        },
    ]

    /// Milliseconds as a whole number, 100 ms to a day (the config file's range).
    private static func socketIOMillis(_ text: String, _ flag: String) throws(UsageError) -> UInt64 {
        guard let value = UInt64(text), (100...86_400_000).contains(value) else {
            throw UsageError(description: "\(flag) must be a whole number of milliseconds in 100...86400000, got \"\(text)\"")
        }
        return value
    }
}
