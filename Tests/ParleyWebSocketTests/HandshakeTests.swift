import Testing
@testable import ParleyWebSocket

private func lookup(_ headers: [String: String]) -> (String) -> String? {
    { name in headers.first { $0.key.lowercased() == name.lowercased() }?.value }
}

private let goodRequest: [String: String] = [
    "Host": "example.com",
    "Upgrade": "websocket",
    "Connection": "keep-alive, Upgrade",
    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version": "13",
]

@Suite struct HandshakeTests {
    /// `Connection` and `Upgrade` are comma-separated token lists (RFC 7230 §7, RFC 6455
    /// §4.2.1): any element, whitespace around it, any case; never a part of an element.
    @Test func headerTokensAreListElementsInAnyCase() {
        let yes = ["upgrade", "Upgrade", "UPGRADE", "keep-alive, Upgrade", "keep-alive,upgrade", " upgrade ,", "\tUpGrAdE\t", "a,,upgrade", "x, upgrade, y"]
        let no: [String?] = [nil, "", ",", " ", "upgrade2", "upgrad", "keep-alive", "up grade", "xupgrade", "upgrade-x, keep-alive", "upgrad e"]
        for value in yes { #expect(WebSocketHandshake.headerContainsToken(value, "upgrade"), "\(value)") }
        for value in no { #expect(!WebSocketHandshake.headerContainsToken(value, "upgrade"), "\(String(describing: value))") }
        #expect(WebSocketHandshake.headerContainsToken("WebSocket", "websocket"))
        #expect(!WebSocketHandshake.headerContainsToken("websocket/13", "websocket"))
    }

    @Test func rfcSampleAcceptValue() {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func acceptsAGoodRequest() throws {
        var request = goodRequest
        request["Sec-WebSocket-Extensions"] = "permessage-deflate; client_max_window_bits"
        let result = try WebSocketHandshake.serverResponse(method: "GET", versionMinor: 1, header: lookup(request),
                                                           configuration: WebSocketConfiguration()).get()
        #expect(result.headers.map { "\($0.0): \($0.1)" } == [
            "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
            "Sec-WebSocket-Extensions: permessage-deflate",
        ])
        #expect(result.deflate == PerMessageDeflateParameters())
        // Deflate switched off in the configuration.
        let off = try WebSocketHandshake.serverResponse(method: "GET", versionMinor: 1, header: lookup(request),
                                                        configuration: WebSocketConfiguration(acceptsDeflate: false)).get()
        #expect(off.deflate == nil)
        #expect(off.headers.count == 3)
    }

    @Test(arguments: [
        ("Upgrade", "h2c", 400), ("Upgrade", nil, 400), ("Connection", "keep-alive", 400), ("Connection", nil, 400),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ", 400), ("Sec-WebSocket-Key", "c2hvcnQ=", 400),
        ("Sec-WebSocket-Key", "!!!!!!!!!!!!!!!!!!!!!!==", 400), ("Sec-WebSocket-Key", nil, 400),
        ("Sec-WebSocket-Version", "8", 426), ("Sec-WebSocket-Version", nil, 426), ("Host", nil, 400),
    ] as [(String, String?, Int)])
    func rejectsBadRequests(name: String, value: String?, status: Int) {
        var request = goodRequest
        request[name] = value
        let result = WebSocketHandshake.serverResponse(method: "GET", versionMinor: 1, header: lookup(request),
                                                       configuration: WebSocketConfiguration())
        guard case .failure(let error) = result else { Issue.record("accepted"); return }
        #expect(error.status == status)
        if status == 426 {
            #expect(error.headers.map(\.name) == ["Sec-WebSocket-Version"])
            #expect(error.headers.map(\.value) == ["13"])
        }
    }

    @Test func rejectsWrongMethodAndVersion() {
        let post = WebSocketHandshake.serverResponse(method: "POST", versionMinor: 1, header: lookup(goodRequest),
                                                     configuration: WebSocketConfiguration())
        let http10 = WebSocketHandshake.serverResponse(method: "GET", versionMinor: 0, header: lookup(goodRequest),
                                                       configuration: WebSocketConfiguration())
        if case .success = post { Issue.record("POST accepted") }
        if case .failure(let e) = http10 { #expect(e.status == 400) } else { Issue.record("HTTP/1.0 accepted") }
    }

    @Test func clientRequestAndResponseValidation() throws {
        let key = WebSocketHandshake.makeClientKey()
        #expect(WebSocketHandshake.isValidKey(key))
        #expect(WebSocketHandshake.makeClientKey() != key)
        let request = String(decoding: WebSocketHandshake.clientRequest(host: "localhost:8080", path: "/v3/websocket", key: key,
                                                                        offerDeflate: true, extraHeaders: [("Origin", "http://x")]), as: UTF8.self)
        #expect(request.hasPrefix("GET /v3/websocket HTTP/1.1\r\nHost: localhost:8080\r\n"))
        #expect(request.contains("Sec-WebSocket-Key: \(key)\r\n"))
        #expect(request.contains("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"))
        #expect(request.hasSuffix("Origin: http://x\r\n\r\n"))

        // Feed the request's headers to the server side and validate its answer as the client.
        var headers: [String: String] = [:]
        for line in request.split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[String(parts[0])] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        let response = try WebSocketHandshake.serverResponse(method: "GET", versionMinor: 1, header: lookup(headers),
                                                             configuration: WebSocketConfiguration()).get()
        let responseHeaders = Dictionary(uniqueKeysWithValues: response.headers.map { ($0.0, $0.1) })
        #expect(try WebSocketHandshake.validateServerResponse(status: 101, header: lookup(responseHeaders), key: key,
                                                              offeredDeflate: true) == response.deflate)
        #expect(throws: WebSocketHandshakeError.self) {
            try WebSocketHandshake.validateServerResponse(status: 200, header: lookup(responseHeaders), key: key, offeredDeflate: true)
        }
        #expect(throws: WebSocketHandshakeError.self) {
            try WebSocketHandshake.validateServerResponse(status: 101, header: lookup(responseHeaders),
                                                          key: WebSocketHandshake.makeClientKey(), offeredDeflate: true)
        }
        #expect(throws: WebSocketHandshakeError.self) {  // extension we did not offer
            try WebSocketHandshake.validateServerResponse(status: 101, header: lookup(responseHeaders), key: key, offeredDeflate: false)
        }
    }
}
