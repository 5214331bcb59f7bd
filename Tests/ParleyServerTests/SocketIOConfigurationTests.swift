import Foundation
import ParleyCore
import Testing
@testable import ParleyServer

/// The Socket.IO door's settings: flags, `PARLEY_*` variables and config-file keys.
@Suite struct SocketIOConfigurationTests {
    @Test func defaults() throws {
        let c = try #require(try ServerConfiguration.parse(arguments: [], environment: [:]))
        #expect(c.socketIOPingIntervalMillis == 25_000 && c.socketIOPingTimeoutMillis == 20_000)
        #expect(c.socketIOConnectTimeoutMillis == 45_000)
        #expect(c.engineIOEchoPath == nil && !c.socketIOTestApp)
        #expect(c.socketIOMaxPollingSessions == 10_000 && c.socketIOPollingRatePerSecond == 200)
    }

    @Test func heartbeatAndDiagnosticsFromFlagsEnvironmentAndFile() throws {
        let flags = try #require(try ServerConfiguration.parse(arguments: [
            "--socketio-ping-interval", "300", "--socketio-ping-timeout=200", "--socketio-connect-timeout", "1000",
            "--eio-echo-path", "/engine.io/", "--sio-test-app", "--socketio-max-polling-sessions", "5",
            "--socketio-polling-rate", "7",
        ], environment: [:]))
        #expect(flags.socketIOPingIntervalMillis == 300 && flags.socketIOPingTimeoutMillis == 200)
        #expect(flags.socketIOConnectTimeoutMillis == 1000)
        #expect(flags.engineIOEchoPath == "/engine.io/" && flags.socketIOTestApp)
        #expect(flags.socketIOMaxPollingSessions == 5 && flags.socketIOPollingRatePerSecond == 7)
        let environment = try #require(try ServerConfiguration.parse(arguments: ["--socketio-ping-timeout", "999"], environment: [
            "PARLEY_SOCKETIO_PING_INTERVAL": "1234", "PARLEY_SOCKETIO_PING_TIMEOUT": "4321", "PARLEY_SIO_TEST_APP": "1",
            "PARLEY_EIO_ECHO_PATH": "/eio",
        ]))
        #expect(environment.socketIOPingIntervalMillis == 1234)
        #expect(environment.socketIOPingTimeoutMillis == 999, "a flag wins over its variable")
        #expect(environment.socketIOTestApp && environment.engineIOEchoPath == "/eio")
        var file = ServerConfiguration()
        try ConfigFile.apply(Array("""
            {"limits": {"socketIOPingIntervalMillis": 5000, "socketIOPingTimeoutMillis": 3000,
                        "socketIOConnectTimeoutMillis": 2000, "socketIOMaxPollingSessions": 9}}
            """.utf8), name: "parley.json", to: &file)
        #expect(file.socketIOPingIntervalMillis == 5000 && file.socketIOPingTimeoutMillis == 3000)
        #expect(file.socketIOConnectTimeoutMillis == 2000 && file.socketIOMaxPollingSessions == 9)
    }

    @Test func badValuesAreUsageErrors() {
        for arguments in [["--socketio-ping-interval", "0"], ["--socketio-ping-interval", "25s"], ["--socketio-ping-timeout", "-1"],
                          ["--eio-echo-path", "engine.io"], ["--eio-echo-path", "/socket.io/"], ["--sio-test-app=maybe"],
                          ["--socketio-max-polling-sessions", "0"]] {
            #expect(throws: ServerConfiguration.UsageError.self, "\(arguments)") {
                _ = try ServerConfiguration.parse(arguments: arguments, environment: [:])
            }
        }
    }
}
