/// The bare Engine.IO server of `--eio-echo-path` (a diagnostic endpoint for the Engine.IO
/// protocol's conformance suite, off by default): every message packet goes back to its sender
/// unchanged, text as text and binary as binary. Nothing of Socket.IO is on it.
final class EngineIOEchoHandler: EngineIOSessionHandler {
    /// The session it sits on; weak, as the session owns its handler.
    private weak var channel: EngineIOSession?

    init(channel: EngineIOSession) { self.channel = channel }

    func engineIOSessionOpened() {}

    func engineIOSessionReceived(_ message: EngineIOMessage) { channel?.send([message]) }

    func engineIOSessionClosed(reason: String) {}
}
