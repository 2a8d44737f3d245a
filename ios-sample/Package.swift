// swift-tools-version:6.0
// The iOS sample's logic as a package of its own: `TernSampleLogic` (view models, reply
// suggestion, the in-app UI agent; no SwiftUI, so it builds and is tested on Linux too) and
// `SampleLogicChecks`, the checks that run it against a real model:
//   swift run SampleLogicChecks PATH/TO/SmolLM2-135M-Instruct.Q4_1.gguf CASES_DIR
// The SwiftUI app is TernSample.swiftpm beside this file; it depends on this package.
// Tern itself comes from ../bindings/swift (run its build-xcframework.sh on a Mac first).

import PackageDescription

let package = Package(
    name: "TernSample",
    platforms: [.iOS(.v17), .macOS(.v14)],
    products: [
        .library(name: "TernSampleLogic", targets: ["TernSampleLogic"])
    ],
    dependencies: [
        .package(path: "../bindings/swift")
    ],
    targets: [
        .target(name: "TernSampleLogic", dependencies: [.product(name: "Tern", package: "swift")]),
        .executableTarget(name: "SampleLogicChecks", dependencies: ["TernSampleLogic"], path: "Tests/SampleLogicChecks"),
    ]
)
