// swift-tools-version:6.0
// Tern for iOS and macOS: the Rust library as a binary XCFramework (TernFFI, C interface) and
// the `Tern` Swift module on top (the UniFFI-generated code plus Sources/Tern/Streaming.swift).
//
// Both generated parts come from build-xcframework.sh (run it on a Mac first):
//   TernFFI.xcframework              static libraries for iOS, the iOS simulator and macOS
//   Sources/Tern/Generated/Tern.swift
// Apps that add Tern by URL get the repository root's Package.swift, the same package with the
// published XCFramework (release.sh).

import PackageDescription

let package = Package(
    name: "Tern",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Tern", targets: ["Tern"])
    ],
    targets: [
        .binaryTarget(name: "TernFFI", path: "TernFFI.xcframework"),
        // Swift 6 language mode (complete concurrency checking), as the Linux tests compile it.
        .target(name: "Tern", dependencies: ["TernFFI"], path: "Sources/Tern", resources: [.copy("PrivacyInfo.xcprivacy")]),
    ]
)
