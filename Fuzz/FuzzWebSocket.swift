// libFuzzer target: the WebSocket protocol machine, server role, with and without deflate.
// Invariants: feeding whole or split gives the same actions; nothing follows .closeConnection.
import ParleyWebSocket

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWebSocket(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let deflate: PerMessageDeflateParameters? = bytes[0] & 1 == 1
        ? PerMessageDeflateNegotiation.negotiateServer(offerHeader: "permessage-deflate")?.parameters : nil
    var configuration = WebSocketConfiguration()
    configuration.maxMessageSize = 64 * 1024
    configuration.maxFrameSize = 64 * 1024
    let payload = Array(bytes.dropFirst())
    let whole = WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: deflate)
    let one = whole.receive(payload)
    let split = WebSocketProtocolMachine(role: .server, configuration: configuration, deflate: deflate)
    let cut = payload.isEmpty ? 0 : Int(bytes[0] >> 1) % (payload.count + 1)
    let two = split.receive(Array(payload[..<cut])) + split.receive(Array(payload[cut...]))
    // Pongs and closes are deterministic; masking keys are not used by the server role.
    precondition(one == two, "split feeding changed the actions")
    if let index = one.firstIndex(of: .closeConnection) { precondition(index == one.count - 1, "actions after close") }
    return 0
}
