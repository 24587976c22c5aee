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
        // The one JSON reader (a tokenizer under the tree parser, the scan and the events decoder)
        // and the writer every response body goes through.
        .target(name: "JSON", dependencies: ["Timestamps"]),
        // What both halves of the server share at the bottom: the log vocabulary and its JSON-lines
        // logger, the named-thread helper, the wall clock.
        .target(name: "Runtime", dependencies: ["JSON", "Timestamps"]),
        // The contract's vocabulary (docs/API.md): identifiers, event ids, event types and outcomes,
        // and the byte order identifiers sort in. Values only, no behaviour beyond their form.
        .target(name: "Contract"),
        .target(name: "HTTP"),
        .target(name: "HTTPServer", dependencies: ["HTTP", "CEpoll", "JSON", "Runtime", "Timestamps"]),
        .target(name: "Postgres", dependencies: ["CLibPQ", "Runtime", "Timestamps"]),
        // The dashboard's files are compiled into the binary (PackageResources), served as they are.
        .target(name: "AdTally", dependencies: ["Contract", "HTTP", "HTTPServer", "JSON", "Postgres", "Runtime", "Timestamps"],
                resources: [
                    .embedInCode("Operations/Assets/dashboard.html"),
                    .embedInCode("Operations/Assets/dashboard.js"),
                    .embedInCode("Operations/Assets/dashboard.css"),
                    .embedInCode("Operations/Assets/favicon.svg"),
                ]),
        // The composition root: the configuration, the wiring of every slice, the process's
        // lifecycle and commands. Not a folder of AdTally, so that no folder there has to name all
        // the others.
        .target(name: "AdTallyApp", dependencies: ["AdTally", "Contract", "HTTP", "HTTPServer", "JSON", "Postgres", "Runtime", "Timestamps"]),
        .executableTarget(name: "adtally", dependencies: ["AdTally", "AdTallyApp", "Runtime"]),
        .target(name: "AdTallyClient", dependencies: ["Timestamps"]),
        .executableTarget(name: "adtally-feed-demo", dependencies: ["AdTallyClient"]),
        .executableTarget(name: "adtally-client-bench", dependencies: ["AdTallyClient"]),

        // Shared by the test targets: a fresh database per test on the PostgreSQL of scripts/test.
        .target(name: "TestSupport", dependencies: ["Postgres", "Runtime", "Timestamps"], path: "Tests/TestSupport"),
        // A process that uses AdTallyClient, for the end-to-end tests that kill it with SIGKILL.
        .executableTarget(name: "adtally-client-harness", dependencies: ["AdTallyClient"],
                          path: "Tests/ClientHarness"),

        .testTarget(name: "TimestampsTests", dependencies: ["Timestamps"]),
        .testTarget(name: "JSONTests", dependencies: ["JSON", "Timestamps"]),
        .testTarget(name: "ContractTests", dependencies: ["Contract"]),
        .testTarget(name: "RuntimeTests", dependencies: ["Runtime"]),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTP", "JSON", "Runtime", "TestSupport"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "AdTallyTests", dependencies: ["AdTally", "AdTallyApp", "Contract", "HTTP", "HTTPServer", "JSON", "Postgres",
                                                         "Runtime", "TestSupport", "Timestamps"]),
        .testTarget(name: "AdTallyAppTests", dependencies: ["AdTallyApp", "AdTally", "HTTPServer", "Runtime", "Timestamps"]),
        .testTarget(name: "AdTallyClientTests", dependencies: ["AdTallyClient"]),
        .testTarget(name: "EndToEndTests",
                    dependencies: ["adtally", "adtally-client-harness", "AdTallyClient", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
