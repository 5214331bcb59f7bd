// libFuzzer target: the native (Scaledrone v3) command decoder.
// Invariant: never crashes; every failure to parse names a reason.
import ParleyCore

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNative(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if case .failure(let failure) = NativeCommand.parse(bytes) {
        precondition(!failure.message.isEmpty, "a refusal without a reason")
    }
    return 0
}
