import Foundation
import ParleyHTTP

/// The admin dashboard (`Sources/ParleyServer/Admin/AdminWeb`, hand-written HTML/CSS/JS, no
/// build step, no CDN), served at `/admin`. Shipped and found like the chat client
/// (``WebClient``): the `AdminWeb` directory of the `Parley_ParleyServer.resources` bundle
/// beside the executable, or `PARLEY_ADMIN_WEB_ROOT`, or the source checkout.
enum AdminDashboard {
    static let files: StaticFiles? = locate().map { StaticFiles(root: $0, maxFileBytes: 1 << 20) }

    /// Same origin only; the page talks to `/admin/api/` and nothing else.
    static let contentSecurityPolicy =
        "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"

    /// The response for a GET/HEAD of `/admin`, `/admin/` or `/admin/FILE`, or nil.
    static func response(for head: HTTPRequestHead) -> HTTPResponse? {
        guard head.method == "GET" || head.method == "HEAD", let files else { return nil }
        let path: String
        switch head.path {
        case "/admin", "/admin/": path = "/"
        case let other where other.hasPrefix("/admin/") && !other.hasPrefix("/admin/api"):
            path = String(other.dropFirst("/admin".count))
        default: return nil
        }
        var inner = head
        inner.path = path
        guard var response = files.response(for: inner), response.status == 200 || response.status == 304 else { return nil }
        response.headers.set("Content-Security-Policy", contentSecurityPolicy)
        response.headers.set("Referrer-Policy", "no-referrer")
        response.headers.set("X-Frame-Options", "DENY")
        return response
    }

    static func locate() -> String? {
        let fileManager = FileManager.default
        func usable(_ path: String) -> Bool {
            var isDirectory: ObjCBool = false
            return fileManager.fileExists(atPath: path + "/index.html", isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        var candidates: [String] = []
        if let root = ProcessInfo.processInfo.environment["PARLEY_ADMIN_WEB_ROOT"], !root.isEmpty {
            candidates.append(root)
        }
        let executable = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        var directories = [executable.deletingLastPathComponent().path, Bundle.main.bundleURL.path]
        #if os(Linux)
        if let exe = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            directories.insert(URL(fileURLWithPath: exe).deletingLastPathComponent().path, at: 0)
        }
        #endif
        for directory in directories {
            candidates.append(directory + "/Parley_ParleyServer.resources/AdminWeb")
            candidates.append(directory + "/Parley_ParleyServer.bundle/Contents/Resources/AdminWeb")
            candidates.append(directory + "/Parley_ParleyServer.bundle/AdminWeb")
        }
        if let resources = Bundle.main.resourcePath {
            candidates.append(resources + "/Parley_ParleyServer.bundle/Contents/Resources/AdminWeb")
        }
        candidates.append(URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("AdminWeb").path)
        return candidates.first(where: usable)
    }
}
