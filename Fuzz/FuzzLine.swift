// libFuzzer target: the line-protocol decoder and command parser.
// Invariants: whole vs byte-by-byte feeding give the same events; no line exceeds the limit.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLine(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var whole = LineDecoder(maximumLength: 64)
    let one = whole.feed(bytes) + whole.quietPeriodElapsed()
    var drip = LineDecoder(maximumLength: 64)
    var two: [LineDecoderEvent] = []
    for byte in bytes { two += drip.feed([byte]) }
    two += drip.quietPeriodElapsed()
    precondition(one == two, "byte-by-byte feeding changed the events")
    for case .line(let line) in one {
        precondition(line.count <= 64, "line over the limit")
        _ = LineCommand.parse(line)
    }
    return 0
}
