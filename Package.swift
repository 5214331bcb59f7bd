// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Parley",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "parley", targets: ["parley"]),
        .library(name: "ParleyCore", targets: ["ParleyCore"]),
        .library(name: "ParleyClient", targets: ["ParleyClient"]),
    ],
    targets: [
        // C libraries from Debian (apt) / Homebrew, each with a module map and a shim.
        .systemLibrary(name: "CLibUV", pkgConfig: "libuv",
                       providers: [.apt(["libuv1-dev"]), .brew(["libuv"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        .systemLibrary(name: "CVips", pkgConfig: "vips",
                       providers: [.apt(["libvips-dev"]), .brew(["vips"])]),
        // Outgoing HTTP/2 for push (APNs, FCM, Web Push), off the event loops.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]),

        .target(name: "ParleyIO", dependencies: ["CLibUV", "COpenSSL"]),
        .target(name: "ParleyHTTP"),
        .target(name: "ParleyWebSocket", dependencies: ["ParleyIO", "ParleyHTTP", "CZlib", "COpenSSL"]),
        .target(name: "ParleyCore"),
        // Logging in swift-log's shape (no dependencies): the server passes its logger down.
        .target(name: "ParleyLog"),
        .target(name: "ParleySQLite", dependencies: ["ParleyCore", "CSQLite"]),
        // Cluster mode: Parley's own RESP2/RESP3 client on ParleyIO (no hiredis).
        .target(name: "ParleyRedis", dependencies: ["ParleyCore", "ParleyIO"]),
        // Attachments: content-addressed file store, image pipeline (libvips), multipart parser,
        // download rules. SHA-256 from OpenSSL; no event loop: work runs on its own thread pool.
        .target(name: "ParleyFiles", dependencies: ["ParleyCore", "CVips", "COpenSSL"]),
        .target(name: "ParleyServer",
                dependencies: ["ParleyIO", "ParleyHTTP", "ParleyWebSocket", "ParleyCore", "ParleySQLite", "ParleyRedis", "ParleyFiles", "ParleyLog",
                               "COpenSSL", "CZlib", "CCurl"],
                // The browser client and the admin dashboard in Web/ are embedded in the binary
                // at build time; BuildInfo.swift (the git commit) is written before each build.
                exclude: ["Web"],
                plugins: ["EmbedWebAssets", "BuildInfoPlugin"]),
        .executableTarget(name: "embed-web-assets", path: "Sources/EmbedWebAssetsTool"),
        .plugin(name: "EmbedWebAssets", capability: .buildTool(), dependencies: ["embed-web-assets"]),
        // Writes BuildInfo.swift (the git commit) before each build, for `parley --version`.
        .plugin(name: "BuildInfoPlugin", capability: .buildTool()),
        // `parley bench` (fanout, idle): a load generator on ParleyIO for any server's doors.
        // Its loop-confined counters skip dynamic exclusivity checks in release builds (the
        // bench shares the CPU with the server it measures). Only the executable uses this
        // target, so the unsafe flag never reaches a package that depends on ParleyClient.
        .target(name: "ParleyBench", dependencies: ["ParleyIO", "ParleyWebSocket", "ParleyCore"],
                swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]),
        .target(name: "ParleyClient", dependencies: ["ParleyIO", "ParleyHTTP", "ParleyWebSocket", "ParleyCore"]),
        .executableTarget(name: "parley", dependencies: ["ParleyServer", "ParleyClient", "ParleyBench", "ParleyCore", "ParleyLog"]),
        // Autobahn|Testsuite client-side runner for `make conformance` (not part of `parley`).
        .executableTarget(name: "autobahn-client", dependencies: ["ParleyIO", "ParleyWebSocket"],
                          path: "Sources/AutobahnClient"),

        .target(name: "ParleyTestSupport", dependencies: ["ParleyWebSocket", "ParleyServer", "ParleyCore", "ParleyIO", "ParleyLog"], path: "Tests/ParleyTestSupport"),
        .testTarget(name: "ParleyIOTests", dependencies: ["ParleyIO", "ParleyTestSupport"]),
        .testTarget(name: "ParleyHTTPTests", dependencies: ["ParleyHTTP", "ParleyTestSupport"]),
        .testTarget(name: "ParleyWebSocketTests", dependencies: ["ParleyWebSocket", "ParleyIO", "ParleyHTTP", "ParleyTestSupport"]),
        .testTarget(name: "ParleyCoreTests", dependencies: ["ParleyCore", "ParleyTestSupport"]),
        .testTarget(name: "ParleyLogTests", dependencies: ["ParleyLog"]),
        .testTarget(name: "ParleySQLiteTests", dependencies: ["ParleySQLite", "ParleyCore", "ParleyTestSupport"]),
        .testTarget(name: "ParleyRedisTests", dependencies: ["ParleyRedis", "ParleyCore", "ParleyIO", "ParleyTestSupport"]),
        .testTarget(name: "ParleyFilesTests", dependencies: ["ParleyFiles", "ParleyCore", "CVips"]),
        .testTarget(name: "ParleyServerTests", dependencies: ["ParleyServer", "ParleyCore", "ParleyIO", "ParleyWebSocket", "ParleyHTTP", "ParleyFiles", "ParleyTestSupport", "ParleyLog", "ParleyRedis"]),
        .testTarget(name: "ParleyClientTests", dependencies: ["ParleyClient", "ParleyServer", "ParleyCore", "ParleyIO", "ParleyWebSocket", "ParleyTestSupport"]),
        .testTarget(name: "ParleyBenchTests", dependencies: ["ParleyBench", "ParleyServer", "ParleyTestSupport"]),
        // One contract per backend protocol (MessageStore, Broker, PresenceStore), run against
        // every implementation.
        .testTarget(name: "ContractTests", dependencies: ["ParleyCore", "ParleySQLite", "ParleyRedis", "ParleyIO", "ParleyTestSupport", "CSQLite"]),
        .testTarget(name: "EndToEndTests", dependencies: ["ParleyServer", "ParleyIO", "ParleyCore", "ParleyWebSocket", "ParleyTestSupport",
                                                      "ParleyFiles", "CVips", "ParleyLog"]),
    ],
    swiftLanguageModes: [.v6]
)
