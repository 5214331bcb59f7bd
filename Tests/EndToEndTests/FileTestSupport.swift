import Foundation
import ParleyCore
import ParleyServer
import ParleyTestSupport

/// One HTTP response with its body as bytes (the file tests compare bytes).
struct FileResponse {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: JSONValue? { try? JSONParser.parse(body) }

    init(_ response: HTTPTestResponse) {
        status = response.status
        headers = response.headers
        body = response.bytes
    }
}

/// Sends one request with `Connection: close` and reads the whole response (until the server
/// closes, `timeout` seconds at most); the body is taken by its Content-Length.
func fileRequest(port: Int, _ method: String, _ target: String, headers: [(String, String)] = [],
                 body: [UInt8]? = nil, timeout: Double = 20) throws -> FileResponse {
    FileResponse(try httpRequest(port: port, method, target, body: body, headers: headers, timeout: timeout))
}

/// Reads one response from `socket` (which the server closes after it).
func readResponse(_ socket: TestSocket, timeout: Double = 20) throws -> FileResponse {
    FileResponse(try HTTPTestClient(socket: socket).responseAtClose(timeout: timeout))
}

/// `multipart/form-data` with one file part (and optional text fields before it).
func multipartBody(file: [UInt8], name: String, type: String?, boundary: String = "parley-test-boundary",
                   fields: [(String, String)] = []) -> (contentType: String, body: [UInt8]) {
    var body: [UInt8] = []
    for (field, value) in fields {
        body += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(field)\"\r\n\r\n\(value)\r\n".utf8)
    }
    var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\n"
    if let type { head += "Content-Type: \(type)\r\n" }
    body += Array((head + "\r\n").utf8) + file + Array("\r\n--\(boundary)--\r\n".utf8)
    return ("multipart/form-data; boundary=\(boundary)", body)
}

extension ParleyServer {
    /// Uploads `bytes` raw; returns the response.
    func upload(_ bytes: [UInt8], name: String, type: String, channel: String = "demo", room: String? = nil,
                headers: [(String, String)] = []) throws -> FileResponse {
        var query = "name=" + (name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name)
        if let room { query += "&room=" + (room.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? room) }
        return try fileRequest(port: httpPort, "POST", "/\(channel)/files?\(query)",
                               headers: [("Content-Type", type)] + headers, body: bytes)
    }

    /// Uploads and returns the attachment the server answered with (fails on any other answer).
    func uploaded(_ bytes: [UInt8], name: String, type: String, channel: String = "demo", room: String? = nil,
                  headers: [(String, String)] = []) throws -> JSONValue {
        let response = try upload(bytes, name: name, type: type, channel: channel, room: room, headers: headers)
        guard response.status == 201, let json = response.json else {
            throw TestSocket.Failure("upload answered \(response.status): \(response.text)")
        }
        return json
    }

    /// Requests the path (and query) of an absolute file URL from this server.
    func download(_ url: String, headers: [(String, String)] = [], method: String = "GET") throws -> FileResponse {
        guard let scheme = url.range(of: "://"), let slash = url[scheme.upperBound...].firstIndex(of: "/") else {
            throw TestSocket.Failure("not an absolute URL: \(url)")
        }
        return try fileRequest(port: httpPort, method, String(url[slash...]), headers: headers)
    }
}

// Blocking overloads for synchronous tests (the async ones live in AuthTestSupport.swift).
extension NativeClient {
    func publishAcknowledged(_ message: JSONValue, to room: String) throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "publish", "room": .string(room), "message": message, "callback": .number(JSONNumber(callback))])
        return try next { $0["callback"]?.intValue == callback }
    }

    func history(_ room: String, limit: Int) throws -> JSONValue {
        let callback = takeCallback()
        try send(["type": "history", "room": .string(room), "limit": .number(JSONNumber(limit)), "callback": .number(JSONNumber(callback))])
        return try next { $0["callback"]?.intValue == callback }
    }
}
