import ParleyLog
import Synchronization
import Testing

@Suite struct LoggerTests {
    @Test func aLevelThatIsOffDoesNotBuildTheMessage() {
        let memory = MemoryLogHandler()
        let logger = Logger(label: "t", destination: LogDestination(handler: memory, level: .info))
        let evaluated = Mutex(0)
        func expensive() -> String {
            evaluated.withLock { $0 += 1 }
            return "expensive"
        }
        logger.debug(expensive(), metadata: ["n": .string(expensive())])
        logger.trace(expensive())
        #expect(evaluated.withLock { $0 } == 0)
        #expect(memory.records.isEmpty)
        logger.info(expensive())
        #expect(evaluated.withLock { $0 } == 1)
        #expect(memory.records.map(\.message) == ["expensive"])
    }
}
