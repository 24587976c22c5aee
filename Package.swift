// swift-tools-version:6.0
import PackageDescription

// AdTally: ad-event tracking service. See README.md ("How it is built") and docs/API.md.
// Dependency arrows point one way: adtally -> AdTally -> {HTTPServer, HTTP, Postgres, Timestamps},
// HTTPServer -> {HTTP, CEpoll, Timestamps}, Postgres -> {CLibPQ, Timestamps} (docs/ARCHITECTURE.md, "Folder
// graph", also for the folders of AdTally). No package from outside the toolchain.
// AdTallyClient is the app-side library (docs/CLIENT.md): Foundation and the calendar (Timestamps)
// only, no server module, so an iOS app can depend on it; adtally-feed-demo (scripts/demo) and adtally-client-bench
// (scripts/bench-client) are executables over it, and nothing in the server depends on it.
let package = Package(
    name: "AdTally",
    // Apple platforms only matter to apps using AdTallyClient (docs/CLIENT.md): its floor, set by
    // OSAllocatedUnfairLock under its own Lock; PlatformFloorTests fails on a use of anything newer
    // outside an availability guard (the sender thread's task executors are behind one). The server's
    // targets (HTTP, HTTPServer, Postgres, AdTally and their tests) use Synchronization, which needs
    // macOS 15, but they build only on Linux (epoll, libpq), where `platforms` does not apply; an app
    // that depends on the AdTallyClient product builds only it and Timestamps.
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        .executable(name: "adtally", targets: ["adtally"]),
        .library(name: "AdTallyClient", targets: ["AdTallyClient"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            path: "Sources/CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // <sys/epoll.h> for HTTPServer's IO loops (Glibc's module map leaves it out).
        .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),
        // Instants and the calendar, shared by the server modules (RFC 3339, timestamptz, local days).
        .target(name: "Timestamps"),
        .target(name: "HTTP"),
        .target(name: "HTTPServer", dependencies: ["HTTP", "CEpoll", "Timestamps"]),
        .target(name: "Postgres", dependencies: ["CLibPQ", "Timestamps"]),
        // The dashboard's files are compiled into the binary (PackageResources), served as they are.
        .target(name: "AdTally", dependencies: ["HTTP", "HTTPServer", "Postgres", "Timestamps"],
                resources: [
                    .embedInCode("Dashboard/Assets/dashboard.html"),
                    .embedInCode("Dashboard/Assets/dashboard.js"),
                    .embedInCode("Dashboard/Assets/dashboard.css"),
                    .embedInCode("Dashboard/Assets/favicon.svg"),
                ]),
        .executableTarget(name: "adtally", dependencies: ["AdTally"]),
        .target(name: "AdTallyClient", dependencies: ["Timestamps"]),
        .executableTarget(name: "adtally-feed-demo", dependencies: ["AdTallyClient"]),
        .executableTarget(name: "adtally-client-bench", dependencies: ["AdTallyClient"]),

        // Shared by the test targets: a fresh database per test on the PostgreSQL of scripts/test.
        .target(name: "TestSupport", dependencies: ["Postgres"], path: "Tests/TestSupport"),
        // A process that uses AdTallyClient, for the end-to-end tests that kill it with SIGKILL.
        .executableTarget(name: "adtally-client-harness", dependencies: ["AdTallyClient"],
                          path: "Tests/ClientHarness"),

        .testTarget(name: "TimestampsTests", dependencies: ["Timestamps"]),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTP"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "AdTallyTests", dependencies: ["AdTally", "Postgres", "HTTP", "HTTPServer", "TestSupport"]),
        .testTarget(name: "AdTallyClientTests", dependencies: ["AdTallyClient"]),
        .testTarget(name: "EndToEndTests",
                    dependencies: ["adtally", "adtally-client-harness", "AdTallyClient", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
