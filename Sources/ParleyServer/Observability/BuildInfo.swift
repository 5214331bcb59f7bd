import COpenSSL
import ParleyFiles
import ParleyIO
import ParleySQLite
import ParleyWebSocket

/// What this binary is: `parley --version`, `parley_build_info`, the admin API.
public enum BuildInfo {
    /// Parley's version.
    public static let version = "0.1.0"
    /// The git commit it was built from (`-modified` when the checkout had changes), or
    /// `unknown` outside a git checkout.
    public static var commit: String { GeneratedBuildInfo.commit }

    /// The C libraries linked in, with the versions found at run time.
    public static var libraries: [(name: String, version: String)] {
        [("libuv", EventLoopGroup.libuvVersion),
         ("SQLite", SQLiteMessageStore.libraryVersion),
         ("OpenSSL", openSSLVersion),
         ("zlib", PerMessageDeflateParameters.zlibVersion),
         ("libvips", ImageProcessor.libraryVersion)]
    }

    /// `OpenSSL_version` without its leading "OpenSSL ".
    private static var openSSLVersion: String {
        let text = String(cString: OpenSSL_version(OPENSSL_VERSION))
        return text.hasPrefix("OpenSSL ") ? String(text.dropFirst("OpenSSL ".count)) : text
    }

    /// The `parley --version` text.
    public static var versionText: String {
        (["parley \(version) (commit \(commit))"] + libraries.map { "\($0.name) \($0.version)" }).joined(separator: "\n")
    }
}
