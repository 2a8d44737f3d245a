// Android library (AAR) of Tern: the Rust library built for each ABI with cargo-ndk, the
// Kotlin bindings generated from it by UniFFI (uniffi.toml at the repository root, Android
// flavour), and the hand-written layer in src/main/kotlin and src/android/kotlin (its part that
// needs Android's classes).
//
// Needs on the build machine: the Android SDK + NDK (r27 or newer), rustup with the targets
// aarch64-linux-android and x86_64-linux-android, and cargo-ndk (`cargo install cargo-ndk`).

import java.io.RandomAccessFile

plugins {
    id("com.android.library") version "8.7.3"
    id("org.jetbrains.kotlin.android") version "2.1.0"
    `maven-publish`
}

group = "dev.tern"
version = "0.1.0"

/** ABIs shipped in the AAR, with their Rust targets. */
val abis = mapOf(
    "arm64-v8a" to "aarch64-linux-android",
    "x86_64" to "x86_64-linux-android",
)
val minSdkVersion = 26
/** Android 15+ devices may use 16 KB memory pages: every LOAD segment must be aligned to them. */
val pageSize = 16384L

val repoRoot: File = rootDir.resolve("../..").canonicalFile
val cargoProfile = providers.gradleProperty("tern.cargoProfile").getOrElse("release")
val generatedDir = layout.buildDirectory.dir("generated/uniffi")
val jniLibsDir = generatedDir.map { it.dir("jniLibs") }
val kotlinOutDir = generatedDir.map { it.dir("kotlin") }

android {
    namespace = "dev.tern"
    compileSdk = 35
    ndkVersion = "27.2.12479018"

    defaultConfig {
        minSdk = minSdkVersion
        consumerProguardFiles("consumer-rules.pro")
        ndk { abiFilters += abis.keys }
    }

    sourceSets["main"].apply {
        java.srcDir(kotlinOutDir)
        // The hand-written code that needs Android's classes (the JVM suites compile src/main alone).
        java.srcDir("src/android/kotlin")
        jniLibs.srcDir(jniLibsDir)
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions { jvmTarget = "17" }

    // Native libraries stay uncompressed in the APK and are mapped in place (page-aligned).
    packaging { jniLibs { useLegacyPackaging = false } }

    publishing {
        singleVariant("release") { withSourcesJar() }
    }
}

dependencies {
    // Flow is part of the public API (Session.stream).
    api("org.jetbrains.kotlinx:kotlinx-coroutines-core:1.9.0")
    // The AAR flavour carries libjnidispatch.so for every Android ABI (16 KB aligned from 5.17).
    implementation("net.java.dev.jna:jna:5.17.0@aar")
    // The generated Android-flavour bindings annotate API-level checks (@RequiresApi).
    implementation("androidx.annotation:annotation:1.9.1")
}

val cargoBuild by tasks.registering(Exec::class) {
    description = "Builds libtern_ffi.so for each ABI with cargo-ndk"
    workingDir = repoRoot
    // Everything the library is built from: each crate's sources, manifest and build script,
    // the workspace's manifest, lock file and cargo configuration.
    for (crate in listOf("sdk/core", "sdk/store", "bindings/ffi")) {
        inputs.files(fileTree(repoRoot.resolve(crate)) { exclude("tests/**", "benches/**", "examples/**") })
    }
    inputs.files(repoRoot.resolve("Cargo.toml"), repoRoot.resolve("Cargo.lock"), repoRoot.resolve(".cargo/config.toml"))
    outputs.dir(jniLibsDir)
    val ndkDir = android.ndkDirectory
    doFirst { environment("ANDROID_NDK_HOME", ndkDir.absolutePath) }
    // 16 KB page alignment of the shared library (NDK r27 still defaults to 4 KB).
    for (target in abis.values) {
        val variable = "CARGO_TARGET_${target.uppercase().replace('-', '_')}_RUSTFLAGS"
        environment(variable, "-C link-arg=-Wl,-z,max-page-size=$pageSize")
    }
    commandLine(
        listOf("cargo", "ndk", "--platform", "$minSdkVersion", "-o", jniLibsDir.get().asFile.path) +
            abis.keys.flatMap { listOf("-t", it) } +
            listOf("build", "-p", "tern-ffi", "--lib", "--no-default-features", "--profile", cargoProfile),
    )
}

val checkPageAlignment by tasks.registering {
    description = "Fails if a native library has a LOAD segment aligned to less than 16 KB"
    dependsOn(cargoBuild)
    inputs.dir(jniLibsDir)
    doLast {
        jniLibsDir.get().asFile.walk().filter { it.name.endsWith(".so") }.forEach { so ->
            val align = minLoadAlignment(so)
            check(align >= pageSize) { "${so.path}: LOAD segments aligned to $align bytes, need $pageSize" }
        }
    }
}

val generateBindings by tasks.registering(Exec::class) {
    description = "Generates the Kotlin bindings (package dev.tern) from the built library"
    dependsOn(cargoBuild)
    workingDir = repoRoot
    val library = jniLibsDir.map { it.file("arm64-v8a/libtern_ffi.so") }
    inputs.file(library)
    inputs.file(repoRoot.resolve("uniffi.toml"))
    outputs.dir(kotlinOutDir)
    commandLine(
        "cargo", "run", "-q", "-p", "tern-ffi", "--bin", "uniffi-bindgen", "--",
        "generate", "--library", library.get().asFile.path, "--language", "kotlin",
        "--config", repoRoot.resolve("uniffi.toml").path, "--out-dir", kotlinOutDir.get().asFile.path,
    )
}

tasks.named("preBuild") { dependsOn(generateBindings, checkPageAlignment) }

publishing {
    publications {
        register<MavenPublication>("release") {
            artifactId = "tern-android"
            afterEvaluate { from(components["release"]) }
        }
    }
}

/** The smallest `p_align` of the PT_LOAD program headers of a 64-bit little-endian ELF file. */
fun minLoadAlignment(file: File): Long = RandomAccessFile(file, "r").use { f ->
    fun u16(at: Long): Int { f.seek(at); return f.readUnsignedByte() or (f.readUnsignedByte() shl 8) }
    fun u32(at: Long): Long = u16(at).toLong() or (u16(at + 2).toLong() shl 16)
    fun u64(at: Long): Long = u32(at) or (u32(at + 4) shl 32)
    f.seek(0)
    val ident = ByteArray(6).also { f.readFully(it) }
    check(ident[0] == 0x7f.toByte() && ident[1] == 'E'.code.toByte() && ident[4] == 2.toByte() && ident[5] == 1.toByte()) {
        "${file.path} is not a 64-bit little-endian ELF file"
    }
    val phoff = u64(0x20)
    val phentsize = u16(0x36)
    val phnum = u16(0x38)
    val PT_LOAD = 1L
    (0 until phnum).map { phoff + it.toLong() * phentsize }
        .filter { u32(it) == PT_LOAD }
        .minOf { u64(it + 0x30) }
}
