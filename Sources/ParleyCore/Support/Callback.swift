/// A closure to keep behind a lock and call many times: `Mutex<Callback<…>?>`, not
/// `Mutex<(… -> Void)?>`.
///
/// Read out of a `Mutex` with `withLock { $0 }`, a closure stored as the mutex's value is
/// wrapped in one more reabstraction thunk on every read, and the wrapper is what stays
/// stored (Swift 6.3): after n reads a call went through n thunks, so an observer called per
/// message made every message slower than the one before (Hub's stored-message observer,
/// with push notifications on). Inside a struct the closure keeps its representation.
public struct Callback<Function: Sendable>: Sendable {
    public let call: Function
    public init(_ call: Function) { self.call = call }
}
