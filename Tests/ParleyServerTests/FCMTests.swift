import Foundation
import Testing
import ParleyCore
@testable import ParleyServer

/// FCM HTTP v1: the service account file, the RS256 assertion, the message and what FCM's
/// answers mean. (The whole exchange against a local token and send endpoint is in
/// Tests/interop/test_push_fcm.py.)
@Suite struct FCMTests {
    /// A throwaway 1024-bit test key (made for this test with `openssl genpkey`; it signs nothing else).
    static let pem = """
-----BEGIN PRIVATE KEY-----
MIICdwIBADANBgkqhkiG9w0BAQEFAASCAmEwggJdAgEAAoGBALollB228B43SsZt
IoWE4PQGlWYo8CZB96MOqvoOuaXkulEOaTiZwfPreBr5Uaefph5X/kdbknw+SR0L
aOzvpts2nXz2HqMtgw72PDBBRz5d0DyXjWAAZjVDTi2RRRRSEibGtudILnfMwKCj
g8opMYC1d67hixUyTEnBjcRV4YwnAgMBAAECgYEAs+GKj2hwA5ME9FkUKhitVcNi
7fUTlLTcvDp5aOl/51rv3VJixep3reHXD6HskWJKojoAJC7OkLeT6bhT7drsznMX
YlPCBeXf+TRWA9hyj9nOkckLlmxPdrnMSGcr8zXzv21xnRx+W3+lSw4Kl55sugJO
eNcWZQ2X0JEXDxb5xnkCQQD0QnEMleG+pHeNFgTTV3Pi9Me+PiHMQ2vVNJyGz1bW
qTYQjz//SzbrrMe9skocqGk4s+PhehyWwIM4YazdfG0bAkEAwxgSoUDUQRVZ/tpk
j5ADNysCeIY7XtWtOOAfDCXtqHYE/JleLyUNo7utxxQU32DK8ngiLWMY1zCjYoBi
UxoJ5QJAFz/TvtztVdYVwwobf3pNf4bJFGSZlvW759lQJMzLeTc1/DGGZ+hi29/g
S0ATKdMl4M3OnQGggwDj/JPffl1/jQJAQO2bDaWYvkxP1jxyqUDBgTPEL75ktewh
KUOVsaJR1PXqNPMJ4GDRiENm01GAnNMG1+lZXoeTddKPHbIihwusbQJBAOq/6d+G
hSnJ51gCZrCyxnGm95Io+wkpRoIyh3o3ALlsOplO7czbc6j6AQ9uJh378OHBAvd1
0JXLCDdqkeJbSR8=
-----END PRIVATE KEY-----
"""

    /// A throwaway 2048-bit key, the size a Google service account has (made with
    /// `cryptography` for this test): a PEM this long once failed to read when its bytes did
    /// not outlive the memory BIO.
    static let pem2048 = """
-----BEGIN PRIVATE KEY-----
MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCzbZ3jF2X0II1b
h120OtcCwvb8cfu0KeLLc5aSHiMHqM4JbtaIJYmY0QsWPq9XhI5Ktf9O/9Um8Iry
nA/PNjZ26RiR30g/G6fSQoujZSEu4rtjKEbTyvYsYgHnq9j49weNaW06PjLxjnHA
uE7yHKAHeFKj+0pH8y58sLjOshhPPckcKPOwGI3XzpRi9F3b/ACjIQXZPmug6xJB
8UeI/OYhxfNs912bX37Ak6n6WjcobyFESSDj40F00jastjIdyftjvGmdZszs0eEc
vFp1fUvGe0iABM5rp4iwcFTfYYU+5jxvAa6f/XhRE2psceJbzlz6NQaPDlv805qc
uPoaTE17AgMBAAECgf9X2kpWtXbJuP8u23FenIRvLlWsu4UWRWv3qA0u9EPQI6Wq
lkHqop3t3Gzp47O7pklAho1d2/l3+eysLEdp/I2uXIcD0c+/PfyBdsT8Crll4uzd
WzPI4heTGcw3cagP7/fz7NwiFLTJLuvSU1hUM3TFH9/0VtD+LpOx7+kqhmt0YFGZ
FEZtDLkfyaVdlS7uOgQ3uVnLIR4hReNZQsMxih734KQjSteLUkWOo30VJ+pP+ouk
DYUzQVnThQv6guCRnKOgHbok06xQP7WeNvwTG5g6Gdqxp9kN8SMMarXQdWfQmVDY
S5TE2OZxEXkaExuOp1J1q3BJ7Lj58CbnBoQhyzECgYEA8AmnOYkwni1Zk17n/S9a
DFRIIJv0BmcxquRp8PP/Q2oW+SFpqcNKoO+YJWjc32K3OQV4c6IEYjZG+BsgNBYx
c3ZUyCAM2W2TAjGyqH0NXg1Hpcsv4Zmg6CIuZL2MJ/JVK97yz6Z7+tTQgR6FnZhI
fusZ9vIVsC/lSlTRz5WhixECgYEAv1wpORS5wehpiJjodU5lvBml2q2AxwrlHsVO
PWG1Ro932LjgTTJRabqzKCHi/jWirJ29kuWjTdXxEjDFLqWV6CPKg6iuI8FjbdcB
PM8CPSmaNx3VyEHrh1wwXSlD6LhAhJ6tdfoflWdGJiYUDyhmTOZaqPPQgg5ZvvjA
149sl8sCgYEAqHdd8jei86EIeTHmx/9vx69vX9OUlNngNfxRjlbxFLNkpD0bF5aE
zibaNYc/XVi/FzoLq7xOL0/Ax2jiVSwuUMcAAeTcn80TnDqdFTuPIi9X1bihRki4
cbNrtDCEKZUeyceTysEhyo2KONTfGhhC6TC/7F1Dc4BqAJ0/E94EnsECgYEArNAd
BkiaTOyHye1VGQMYyxtadbb0skw7iGNk+ffwTm2oLNcg8XY8ocASpW6c4Tgs1biK
iEvMA7HuyJ+0oyC01XTlIatGwFGYaoyduH22JugYNihCdVxayN5PawKmKlejJGFs
gzvEJBek+TSwLtQsNsxdGXE+XwV4tQdOmB0VU6sCgYAuJ3kkOT0xFsBAlC2+LV48
OMn8UBc8L5AvmxFIibkwq3xAv70NeNgpPGC6skcc3jpuQjxMgV7TH7I5Rg2MPnrH
5Yfspcivs7wIOF062RYdlUCQPU4SB7CEyB5VAO10hCNkuVOqKrGXU2RufKulMNwz
mF/NxI5KIaTYa8TlhEe9bg==
-----END PRIVATE KEY-----
"""

    static func account(_ changes: (inout [String: JSONValue]) -> Void = { _ in }) -> [UInt8] {
        var fields: [String: JSONValue] = ["type": "service_account", "project_id": "chat-app-1", "private_key_id": "k1",
                                           "private_key": .string(pem), "client_email": "push@chat-app-1.iam.gserviceaccount.com"]
        changes(&fields)
        return JSONValue.object(JSONObject(fields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })).serialized()
    }

    static func provider() throws -> FCMProvider {
        FCMProvider(.init(account: try FCMProvider.ServiceAccount(json: account()), endpoint: "https://fcm.example",
                          tokenEndpoint: "https://oauth2.example/token"))
    }

    @Test func rs256MatchesOpenSSLsCommandLine() throws {
        // `printf parley | openssl dgst -sha256 -sign key.pem`: PKCS #1 v1.5 is deterministic.
        let key = try RSAKey(pem: Self.pem)
        #expect(Base64URL.encode(try key.signRS256(Array("parley".utf8))) == "ZgT_r_y4i1ZSLut6MaV5n7Aym9SP4W59klzVHspzNfgrPdRd831xp8v5C9FOOKfvFkeWv-KQ-8fJR6nglK8ipIQhVgx4rJ1MRJgEt6XzJidT8m_U5YMX0uP3EtZXvpfeSogl8-WbCJI_dfshU9cqH9M8a_qwkEGerqwZQteqmCU")
        #expect(try RSAKey(pem: Self.pem2048).signRS256([1]).count == 256)
        #expect(throws: P256Key.Failure.self) { try RSAKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
        // An EC key is not an RSA key, and the other way round.
        let ec = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgegaTgdkz3tszDoc5\niOhcCMg+saBgSodaawzphWH3n6yhRANCAARF9edFYbhsXCyybzy3HPzCysfLjR4y\nBVJ100jvkoAOcvaiPHcorGO0t6nhJ9CcAkbdndUXiAWMlDXOZtQZmEuJ\n-----END PRIVATE KEY-----\n"
        #expect(throws: P256Key.Failure.self) { try RSAKey(pem: ec) }
        #expect(throws: P256Key.Failure.self) { try P256Key(pem: Self.pem) }
    }

    @Test func theServiceAccountFileIsChecked() throws {
        let account = try FCMProvider.ServiceAccount(json: Self.account())
        #expect(account.projectID == "chat-app-1" && account.privateKeyID == "k1")
        let bad: [(String, (inout [String: JSONValue]) -> Void)] = [
            ("service account", { $0["type"] = "authorized_user" }),
            ("project_id", { $0["project_id"] = nil }),
            ("lowercase", { $0["project_id"] = "../other" }),
            ("client_email", { $0["client_email"] = "" }),
            ("private_key", { $0["private_key"] = "not a key" }),
        ]
        for (what, change) in bad {
            #expect {
                _ = try FCMProvider.ServiceAccount(json: Self.account(change))
            } throws: { ($0 as? StartupError)?.description.contains(what) == true }
        }
        #expect(throws: StartupError.self) { try FCMProvider.ServiceAccount(json: Array("{".utf8)) }
    }

    @Test func theAssertionAsksForTheMessagingScopeAtTheTokenEndpoint() throws {
        let jwt = try Self.provider().assertion(nowSeconds: 1_000)
        let parts = jwt.split(separator: ".").map { Base64URL.decode(String($0)) ?? [] }
        #expect(parts.count == 3 && parts[2].count == 128)
        let header = try JSONParser.parse(parts[0]), claims = try JSONParser.parse(parts[1])
        #expect(header["alg"]?.stringValue == "RS256" && header["kid"]?.stringValue == "k1")
        #expect(claims["iss"]?.stringValue == "push@chat-app-1.iam.gserviceaccount.com")
        #expect(claims["scope"]?.stringValue == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims["aud"]?.stringValue == "https://oauth2.example/token")
        #expect(claims["iat"]?.intValue == 1_000 && claims["exp"]?.intValue == 4_600)
    }

    @Test func theMessageCarriesTheRoomAsCollapseKeyAndTheDataAsStrings() throws {
        let content = PushRules.Content(title: "#team", body: "Alice: hi", thread: "team", badge: 3, channel: "demo", room: "team",
                                        offset: 42, messageID: "m1")
        let message = try JSONParser.parse(FCMProvider.message(content, token: "tok-1"))["message"]
        #expect(message?["token"]?.stringValue == "tok-1")
        #expect(message?["notification"]?["title"]?.stringValue == "#team" && message?["notification"]?["body"]?.stringValue == "Alice: hi")
        #expect(message?["data"]?["offset"]?.stringValue == "42" && message?["data"]?["room"]?.stringValue == "team")
        let collapse = PushService.topic(for: "team")
        #expect(message?["android"]?["collapse_key"]?.stringValue == collapse)
        #expect(message?["android"]?["notification"]?["notification_count"]?.intValue == 3)
        #expect(message?["apns"]?["payload"]?["aps"]?["badge"]?.intValue == 3)
        #expect(message?["apns"]?["headers"]?["apns-collapse-id"]?.stringValue == collapse)
        // Every data value is a string, as FCM requires.
        let data = message?["data"]?.objectValue?.values ?? []
        #expect(data.count == 5 && data.allSatisfy { $0.stringValue != nil })
    }

    @Test func fcmsAnswersDecideTheDevicesFate() throws {
        let fcm = try Self.provider()
        func answer(_ status: Int, _ body: String = "", headers: [(String, String)] = []) -> PushService.Outcome {
            fcm.outcome(of: OutgoingResponse(status: status, headers: headers, body: Array(body.utf8)))
        }
        func error(_ status: Int, _ state: String, code: String?, message: String = "") -> String {
            let details = code.map { #", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "\#($0)"}]"# } ?? ""
            return #"{"error": {"code": \#(status), "message": "\#(message)", "status": "\#(state)"\#(details)}}"#
        }
        #expect(answer(200, #"{"name": "projects/p/messages/1"}"#) == .sent)
        #expect(answer(404, error(404, "NOT_FOUND", code: "UNREGISTERED")) == .gone)
        // A 404 without FCM's UNREGISTERED (a wrong project or endpoint) keeps the device.
        #expect(answer(404, error(404, "NOT_FOUND", code: nil, message: "Requested entity was not found.")) != .gone)
        #expect(answer(404, "<html>not found</html>") != .gone)
        #expect(answer(403, error(403, "PERMISSION_DENIED", code: "SENDER_ID_MISMATCH")) == .gone)
        #expect(answer(400, error(400, "INVALID_ARGUMENT", code: "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token")) == .gone)
        #expect(answer(400, error(400, "INVALID_ARGUMENT", code: "INVALID_ARGUMENT", message: "Invalid JSON payload")) != .gone)
        #expect(answer(429, error(429, "RESOURCE_EXHAUSTED", code: "QUOTA_EXCEEDED"), headers: [("Retry-After", "30")]) == .retry(30_000))
        #expect(answer(503, error(503, "UNAVAILABLE", code: "UNAVAILABLE")) == .retry(5_000))
        #expect(answer(401, error(401, "UNAUTHENTICATED", code: nil)) == .retry(1_000))
        #expect(answer(500, "not json", headers: [("retry-after", "999999")]) == .retry(3_600_000))
    }

    @Test func devicesOnlyWhereTheirProviderIsConfigured() throws {
        var configuration = ServerConfiguration()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("parley-fcm-\(UInt64.random(in: 0...UInt64.max)).json")
        try Data(Self.account()).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        configuration.fcmServiceAccountFile = file.path
        let settings = try PushSettings(configuration)
        #expect(settings.isOn && settings.providers == ["fcm"])
        let fcm = PushDevice(channel: "c", user: "u", platform: .fcm, token: "dTOKEN_abc-123:APA91bHun4MxP5egoKMwt2", registeredMillis: 0)
        #expect(fcm.problem == nil && settings.refusal(for: fcm) == nil)
        let apns = PushDevice(channel: "c", user: "u", platform: .apns, token: String(repeating: "ab", count: 32), topic: "com.example",
                              registeredMillis: 0)
        #expect(settings.refusal(for: apns)?.status == 501)
        #expect(PushDevice(channel: "c", user: "u", platform: .fcm, token: "short", registeredMillis: 0).problem != nil)
        #expect(PushDevice(channel: "c", user: "u", platform: .fcm, token: "aaaaaaaaaaaaaaaaaaaaaa/../x", registeredMillis: 0).problem != nil)
        configuration.fcmServiceAccountFile = "/nonexistent/account.json"
        #expect(throws: StartupError.self) { try PushSettings(configuration) }
    }
}
