import ParleyWebSocket

/// A WebSocket of the native door, the Engine.IO transport or the echo endpoint says goodbye
/// itself when the server stops: close 1001, then TCP at once
/// (``WebSocketServerConnection/serverIsStopping()``).
extension WebSocketServerConnection: GracefulSession {}
