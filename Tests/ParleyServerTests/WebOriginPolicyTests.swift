import ParleyHTTP
import Testing
@testable import ParleyServer

@Suite struct WebOriginPolicyTests {
    func head(host: String?, origin: String? = nil) -> HTTPRequestHead {
        var headers = HTTPHeaders()
        if let host { headers.add("Host", host) }
        if let origin { headers.add("Origin", origin) }
        return HTTPRequestHead(method: "GET", target: "/v3/websocket", versionMinor: 1, headers: headers)
    }

    @Test func apps_scripts_and_the_servers_own_pages_are_served() {
        let policy = WebOriginPolicy(allowedOrigins: [], boundHost: "127.0.0.1", publicURL: nil)
        #expect(policy.refusal(head(host: "127.0.0.1:8080")) == nil)                       // no Origin: not a browser
        #expect(policy.refusal(head(host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080")) == nil)
        #expect(policy.refusal(head(host: "localhost:8080", origin: "http://LOCALHOST:8080/")) == nil)
        #expect(policy.refusal(head(host: "[::1]:8080", origin: "http://[::1]:8080")) == nil)
        #expect(policy.refusal(head(host: "localhost", origin: "http://localhost:80")) == nil)
    }

    @Test func other_pages_are_refused_unless_allowed() {
        let closed = WebOriginPolicy(allowedOrigins: [], boundHost: "0.0.0.0", publicURL: nil)
        #expect(closed.refusal(head(host: "chat.example.com", origin: "https://evil.example"))?.status == 403)
        #expect(closed.refusal(head(host: "chat.example.com", origin: "null"))?.status == 403)
        #expect(closed.refusal(head(host: "chat.example.com:8080", origin: "http://chat.example.com:9090"))?.status == 403)
        #expect(closed.refusal(head(host: "chat.example.com", origin: "https://chat.example.com")) == nil) // port 443 vs no port in Host
        let open = WebOriginPolicy(allowedOrigins: ["https://app.example.com"], boundHost: "0.0.0.0", publicURL: nil)
        #expect(open.refusal(head(host: "chat.example.com", origin: "https://app.example.com")) == nil)
        #expect(open.refusal(head(host: "chat.example.com", origin: "https://app.example.com:443")) == nil)
        #expect(open.refusal(head(host: "chat.example.com", origin: "http://app.example.com"))?.status == 403)
        let any = WebOriginPolicy(allowedOrigins: ["*"], boundHost: "0.0.0.0", publicURL: nil)
        #expect(any.refusal(head(host: "chat.example.com", origin: "https://evil.example")) == nil)
    }

    @Test func on_loopback_a_rebound_name_is_refused() {
        let policy = WebOriginPolicy(allowedOrigins: [], boundHost: "127.0.0.1", publicURL: nil)
        // DNS rebinding: evil.example now resolves to 127.0.0.1, so its page is "same origin".
        #expect(policy.refusal(head(host: "evil.example:8080", origin: "http://evil.example:8080"))?.status == 421)
        #expect(policy.refusal(head(host: "evil.example:8080"))?.status == 421)
        #expect(policy.refusal(head(host: "127.3.4.5:8080")) == nil)
        // Names the operator gave are served.
        let named = WebOriginPolicy(allowedOrigins: ["https://app.example.com"], boundHost: "localhost", publicURL: "https://chat.example.com")
        #expect(named.refusal(head(host: "chat.example.com")) == nil)
        #expect(named.refusal(head(host: "app.example.com")) == nil)
        #expect(named.refusal(head(host: "evil.example"))?.status == 421)
        // Bound to every interface, any host name is fine (the Origin rule still holds).
        #expect(WebOriginPolicy(allowedOrigins: [], boundHost: "0.0.0.0", publicURL: nil).refusal(head(host: "evil.example")) == nil)
    }

    @Test func origins_are_normalized_or_rejected() {
        #expect(WebOriginPolicy.normalize("HTTPS://App.Example.com") == "https://app.example.com:443")
        #expect(WebOriginPolicy.normalize("http://localhost:3000/") == "http://localhost:3000")
        #expect(WebOriginPolicy.normalize("null") == nil)
        #expect(WebOriginPolicy.normalize("https://a.example/path") == nil)
        #expect(WebOriginPolicy.normalize("https://user@a.example") == nil)
        #expect(WebOriginPolicy.normalize("https://a.example:99999") == nil)
        #expect(throws: ServerConfiguration.UsageError.self) {
            _ = try ServerConfiguration.parse(arguments: ["--allowed-origins", "app.example.com"], environment: [:])
        }
        let parsed = try? ServerConfiguration.parse(arguments: ["--allowed-origins", "https://a.example, http://localhost:3000"], environment: [:])
        #expect(parsed?.allowedOrigins == ["https://a.example", "http://localhost:3000"])
    }
}
