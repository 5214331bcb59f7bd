import ParleyLog
import ParleyServer

extension ParleyServer {
    /// A server like `ParleyServer(configuration:)` (the SQLite store under `--data`), with a
    /// ``FaultInjectingMessageStore`` between its hub and that store: the test makes appends
    /// fail, then recover, while every door runs for real.
    public static func withInjectableFaults(_ configuration: ServerConfiguration,
                                            logger: Logger = .disabled) throws -> (ParleyServer, FaultInjectingMessageStore) {
        var faults: FaultInjectingMessageStore?
        let server = try ParleyServer(configuration: configuration, logger: logger) { sqlite in
            let store = FaultInjectingMessageStore(wrapping: sqlite)
            faults = store
            return store
        }
        return (server, faults!)
    }
}
