import Foundation
import ParleyCore
@testable import ParleyServer
import ParleyTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `parley bench upload` works end to end (small: figures come from a quiet machine).
@Suite struct UploadBenchSmokeTests {
    @Test func uploadBenchUploadsAndReportsMemory() throws {
        let server = try startTestServer { $0.uploadsPerMinute = 1_000_000 }
        defer { server.shutdown() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = ["bench", "upload", "--url", "http://127.0.0.1:\(server.httpPort)", "--uploads", "4",
                             "--concurrency", "2", "--size", "60000", "--server-pid", String(getpid()), "--json"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reading = BackgroundThread { output.fileHandleForReading.readDataToEndOfFile() }
        let data: Data
        do {
            data = try reading.result(timeout: 120)
        } catch {
            process.terminate()
            throw error
        }
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let report = try JSONParser.parse(Array(data))
        #expect(report["uploads"] == 4 && report["failed"] == 0, "\(report)")
        #expect((report["uploads_per_second"]?.doubleValue ?? 0) > 0)
        #expect((report["server_rss_kib_peak"]?.intValue ?? 0) > 0)
        // Every upload was a different image, cleaned and thumbnailed.
        #expect(server.core.files.registry.usage(of: "bench") > 4 * 10_000)
    }
}
