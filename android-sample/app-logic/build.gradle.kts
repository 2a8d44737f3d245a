// The sample's logic. An Android library only because the Tern package it uses is an AAR: its
// sources touch no Android API (tests/android-sample/run.sh compiles them on a desktop JVM with
// nothing Android on the classpath), so they can move to a Kotlin Multiplatform module as they are.
plugins {
    id("com.android.library")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "dev.tern.sample.logic"
    compileSdk = 35
    defaultConfig { minSdk = 26 }
    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
    kotlinOptions { jvmTarget = "17" }
    // The checks in src/test run against a real model on a JVM (tests/android-sample/run.sh), not
    // as Android unit tests.
    sourceSets["test"].java.setSrcDirs(emptyList<String>())
}

// snippet:begin dependency
dependencies {
    api("dev.tern:tern-android:0.1.0")
    api("org.jetbrains.kotlinx:kotlinx-coroutines-core:1.9.0")
}
// snippet:end
