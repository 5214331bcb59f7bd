import Foundation

/// A fresh self-signed certificate for localhost / 127.0.0.1 in a temporary directory, made
/// with the openssl tool; returns the PEM paths.
public func makeTestCertificate() throws -> (cert: String, key: String) {
    let dir = NSTemporaryDirectory() + "parley-tls-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/key.pem",
                         "-out", dir + "/cert.pem", "-days", "1", "-subj", "/CN=localhost",
                         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { throw TestSocket.Failure("openssl req failed") }
    return (dir + "/cert.pem", dir + "/key.pem")
}
