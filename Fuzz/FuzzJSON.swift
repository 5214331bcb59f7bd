// libFuzzer target: the JSON parser and writer.
// Invariant: whatever parses serializes to JSON that parses back to the same value.
import ParleyCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    var limits = JSONLimits()
    limits.maxDepth = 32
    guard let value = try? JSONParser.parse(bytes, limits: limits) else { return 0 }
    let again = try? JSONParser.parse(value.serialized(), limits: limits)
    precondition(again == value, "round trip changed the value")
    return 0
}
