// swift-tools-version:6.0
// The Tern sample as an iOS app package: open this folder in Xcode 16 (or Swift Playgrounds 4.5)
// and run it on an iPhone or the simulator. Its logic is the TernSampleLogic library of the
// package one folder up; Tern comes from ../../bindings/swift (run build-xcframework.sh there
// on the Mac first). AppleProductTypes exists only in Apple's toolchains: this manifest is not
// read on Linux, where the tests build the logic alone.

import AppleProductTypes
import PackageDescription

let package = Package(
    name: "TernSample",
    platforms: [.iOS("17.0")],
    products: [
        .iOSApplication(
            name: "Tern sample",
            targets: ["TernSampleApp"],
            bundleIdentifier: "dev.tern.sample",
            teamIdentifier: "",
            displayVersion: "0.1.0",
            bundleVersion: "1",
            appIcon: .placeholder(icon: .chatMessage),
            accentColor: .presetColor(.blue),
            supportedDeviceFamilies: [.phone, .pad],
            supportedInterfaceOrientations: [.portrait, .landscapeRight, .landscapeLeft]
        )
    ],
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        .executableTarget(
            name: "TernSampleApp",
            dependencies: [.product(name: "TernSampleLogic", package: "ios-sample")],
            path: "App"
        )
    ]
)
