// swift-tools-version:6.0
// Tern as a Swift package an app adds by URL:
//   .package(url: "https://github.com/tern-sdk/tern", from: "VERSION"), product "Tern".
// The Rust library is a binary XCFramework (TernFFI); the `Tern` module is the UniFFI-generated
// Swift plus bindings/swift/Sources/Tern. A release (bindings/swift/release.sh) commits the
// generated Swift and writes the XCFramework's URL and checksum below. Without them, or with
// TERN_LOCAL_FFI=1 in the environment, the XCFramework is the one build-xcframework.sh built in
// bindings/swift (development; bindings/swift/Package.swift is the same package for path use).

import Foundation
import PackageDescription

/// The published XCFramework of this version; release.sh sets it.
let published: (url: String, checksum: String)? = nil

let local = published == nil || ProcessInfo.processInfo.environment["TERN_LOCAL_FFI"] != nil
let ffi: Target =
    if let published, !local {
        .binaryTarget(name: "TernFFI", url: published.url, checksum: published.checksum)
    } else {
        .binaryTarget(name: "TernFFI", path: "bindings/swift/TernFFI.xcframework")
    }

let package = Package(
    name: "Tern",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Tern", targets: ["Tern"])
    ],
    targets: [
        ffi,
        .target(
            name: "Tern",
            dependencies: ["TernFFI"],
            path: "bindings/swift/Sources/Tern",
            resources: [.copy("PrivacyInfo.xcprivacy")]
        ),
    ]
)
