import Foundation
import Testing

/// `parley serve --config` with a bad file: exit status 2 and the key path on stderr.
@Suite struct ConfigBinaryTests {
    func run(_ arguments: [String]) throws -> (status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServerProcess.binary)
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test func badConfigFileExitsWithStatus2AndNamesTheKey() throws {
        let directory = NSTemporaryDirectory() + "parley-config-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/parley.json"
        try Data(#"{"channels": [{"id": "a"}, {"id": "b", "secret": "4W1xq9cS0vZk8Yb2HnT5rEu7LpJ3mQ6d", "requireAuth": "yes"}]}"#.utf8).write(to: URL(fileURLWithPath: path))
        let bad = try run(["serve", "--config", path, "--http-port", "0", "--line-port", "0", "--data", directory + "/data"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("config file \(path): channels[1].requireAuth must be true or false"))

        let missing = try run(["serve", "--config", directory + "/nope.json"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("config file \(directory)/nope.json: no such file"))
    }

    @Test func aBadCertificateOrKeyExitsAtStartWithStatus2() throws {
        let directory = NSTemporaryDirectory() + "parley-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let garbage = directory + "/garbage.pem"
        try Data("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: garbage))
        let common = ["serve", "--http-port", "0", "--line-port", "0", "--data", directory + "/data"]
        let bad = try run(common + ["--tls-cert", garbage, "--tls-key", garbage])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains(garbage))
        let missing = try run(common + ["--tls-cert", directory + "/none.pem", "--tls-key", directory + "/none.pem"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("cannot read the TLS certificate file \(directory)/none.pem"))
        let half = try run(common + ["--tls-cert", garbage])
        #expect(half.status == 2)
        #expect(half.stderr.contains("--tls-cert needs --tls-key"))
    }
}
