import Foundation
import ParleyHTTP
@testable import ParleyServer
import Testing

/// Where attachment links point: never at a host the uploader named.
@Suite struct AttachmentLinkTests {
    private func files(_ adjust: (inout ServerConfiguration) -> Void = { _ in }) throws -> (ServerFiles, String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("parley-links-\(UUID().uuidString)").path
        var configuration = ServerConfiguration()
        configuration.dataDirectory = directory
        configuration.fileWorkers = 1
        adjust(&configuration)
        return (try ServerFiles(configuration: configuration), directory)
    }

    private let head = HTTPRequestHead(method: "POST", target: "/demo/files", headers: ["Host": "evil.example:666"])

    @Test func onEveryInterfaceWithoutAPublicURLLinksArePathOnly() throws {
        let (files, directory) = try files()
        defer { files.shutdown(); try? FileManager.default.removeItem(atPath: directory) }
        files.bound(host: "0.0.0.0", port: 8080, tls: false)
        #expect(files.baseURL(for: head, tls: false) == "")
        files.bound(host: "::", port: 8080, tls: true)
        #expect(files.baseURL(for: head, tls: true) == "")
    }

    @Test func aBoundAddressOrThePublicURLIsUsed() throws {
        let (bound, one) = try files()
        defer { bound.shutdown(); try? FileManager.default.removeItem(atPath: one) }
        bound.bound(host: "192.0.2.1", port: 8080, tls: false)
        #expect(bound.baseURL(for: head, tls: false) == "http://192.0.2.1:8080")
        let (named, two) = try files { $0.publicURL = "https://chat.example.com" }
        defer { named.shutdown(); try? FileManager.default.removeItem(atPath: two) }
        named.bound(host: "0.0.0.0", port: 8080, tls: false)
        #expect(named.baseURL(for: head, tls: false) == "https://chat.example.com")
    }
}
