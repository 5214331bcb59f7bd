// libFuzzer target: the PROXY protocol header decoder of the line door (v1 and v2).
// Invariants: whole vs byte-by-byte feeding give the same answer (leftover included); the
// decoder answers within its hard size limit; a header's leftover is the input after it.
import ParleyCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var whole = ProxyHeaderDecoder()
    let one = whole.feed(bytes)
    var drip = ProxyHeaderDecoder()
    var two = ProxyHeaderEvent.needMoreData
    var fed = 0
    for byte in bytes {
        fed += 1
        two = drip.feed([byte])
        if two != .needMoreData { break }
    }
    if case .header(let header, _) = two { two = .header(header, leftover: Array(bytes[fed...])) }
    precondition(one == two, "byte-by-byte feeding changed the answer")
    precondition(fed <= 16 + ProxyHeaderDecoder.maxV2PayloadBytes, "answered past the size limit")
    if case .header(_, let leftover) = one { precondition(leftover == Array(bytes[fed...]), "leftover is not the rest") }
    return 0
}
