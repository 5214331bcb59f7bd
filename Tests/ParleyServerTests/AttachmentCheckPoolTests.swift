import Dispatch
import Foundation
import ParleyCore
import ParleyFiles
@testable import ParleyServer
import Synchronization
import Testing

/// The checks of a publish with attachments (registry look-ups) run on a thread of their
/// own: they never wait behind image decoding on the file workers.
@Suite struct AttachmentCheckPoolTests {
    @Test func aPublishWithAttachmentsIsCheckedWhileEveryFileWorkerIsBusy() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-checks-\(UUID().uuidString)").path
        var configuration = ServerConfiguration()
        configuration.dataDirectory = directory
        configuration.fileWorkers = 1
        let files = try ServerFiles(configuration: configuration)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The only file worker is stuck in a long job (as in decoding a huge image).
        let release = DispatchSemaphore(value: 0)
        try files.pool.submit { _ = release.wait(timeout: .now() + 30) }
        defer {
            release.signal()
            files.shutdown()
        }
        let body = try JSONParser.parse("{\"text\":\"look\",\"attachments\":[\"\(UploadRegistry.makeID())\"]}")
        let answered = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<ResolvedPublish, ParleyError>?>(nil)
        files.resolve(body, channel: "demo") { result in
            outcome.withLock { $0 = result }
            answered.signal()
        }
        #expect(answered.wait(timeout: .now() + 5) == .success, "the check waited behind the busy file worker")
        // An id this channel never issued is refused, with a reason.
        guard case .failure(let error) = outcome.withLock({ $0 }) else {
            Issue.record("an unknown upload id was accepted")
            return
        }
        #expect(!error.message.isEmpty)
    }
}
