import Foundation
import ParleyHTTP

/// The browser chat client (`Sources/ParleyServer/Web`, hand-written HTML/CSS/JS, no build
/// step), served at `/` by the HTTP door.
///
/// The files ship as a SwiftPM resource (`.copy("Web")`), i.e. a `Parley_ParleyServer.resources`
/// directory beside the executable. We look for it ourselves rather than through
/// `Bundle.module`, whose generated accessor calls `fatalError` when the bundle is missing
/// (e.g. a binary copied elsewhere without it): a server without its web client should still
/// serve every other door. `PARLEY_WEB_ROOT` overrides the location (packaging, development).
enum WebClient {
    static let files: StaticFiles? = locate().map { StaticFiles(root: $0, maxFileBytes: 4 << 20) }

    /// Sent with the page and its assets: everything comes from this origin, and the page
    /// talks to this origin's WebSocket only (a second line of defence against injection).
    static let contentSecurityPolicy =
        "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

    /// The response for a GET/HEAD of a client file, or nil (not ours: routing goes on).
    /// HEAD responses already carry the file's Content-Length and no body.
    static func response(for head: HTTPRequestHead) -> HTTPResponse? {
        guard head.method == "GET" || head.method == "HEAD", let files,
              var response = files.response(for: head), response.status == 200 || response.status == 304
        else { return nil }
        response.headers.set("Content-Security-Policy", contentSecurityPolicy)
        response.headers.set("Referrer-Policy", "no-referrer")
        return response
    }

    static func locate() -> String? {
        let fileManager = FileManager.default
        func usable(_ path: String) -> Bool {
            var isDirectory: ObjCBool = false
            return fileManager.fileExists(atPath: path + "/index.html", isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        var candidates: [String] = []
        if let root = ProcessInfo.processInfo.environment["PARLEY_WEB_ROOT"], !root.isEmpty {
            candidates.append(root)
        }
        // Beside the executable, symlinks resolved (`/proc/self/exe` on Linux).
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        var directories = [executable.deletingLastPathComponent().path, Bundle.main.bundleURL.path]
        #if os(Linux)
        if let exe = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.insert(URL(fileURLWithPath: exe).deletingLastPathComponent().path, at: 0)
        }
        #endif
        for directory in directories {
            candidates.append(directory + "/Parley_ParleyServer.resources/Web")
            candidates.append(directory + "/Parley_ParleyServer.bundle/Contents/Resources/Web")
            candidates.append(directory + "/Parley_ParleyServer.bundle/Web")
        }
        if let resources = Bundle.main.resourcePath {
            candidates.append(resources + "/Parley_ParleyServer.bundle/Contents/Resources/Web")
        }
        // A development checkout: the source files themselves.
        candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Web").path)
        return candidates.first(where: usable)
    }
}
