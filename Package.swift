// swift-tools-version:6.0
import PackageDescription

// AdTally: ad-event tracking service. See README.md ("How it is built") and docs/API.md.
// Dependency arrows point one way: adtally -> AdTally -> {HTTPServer, Postgres},
// HTTPServer -> HTTP, Postgres -> CLibPQ. No package from outside the toolchain.
let package = Package(
    name: "AdTally",
    products: [
        .executable(name: "adtally", targets: ["adtally"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLibPQ",
            path: "Sources/CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(name: "HTTP"),
        .target(name: "HTTPServer", dependencies: ["HTTP"]),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "AdTally", dependencies: ["HTTP", "HTTPServer", "Postgres"]),
        .executableTarget(name: "adtally", dependencies: ["AdTally"]),

        // Shared by the test targets: a fresh database per test on the PostgreSQL of scripts/test.
        .target(name: "TestSupport", dependencies: ["Postgres"], path: "Tests/TestSupport"),

        .testTarget(name: "HTTPTests", dependencies: ["HTTP"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTP"]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "TestSupport"]),
        .testTarget(name: "AdTallyTests", dependencies: ["AdTally", "Postgres", "HTTP", "HTTPServer", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["adtally", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
