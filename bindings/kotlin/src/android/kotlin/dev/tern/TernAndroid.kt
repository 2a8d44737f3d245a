// The hand-written layer's Android-only part: what needs Android's own classes (android.*) in its
// signatures. The AAR compiles it with src/main/kotlin (build.gradle.kts adds this directory); the
// JVM suites (tests/kotlin, tests/android-sample) compile src/main/kotlin alone, and the Kotlin
// suite compiles this file with the Android-flavoured bindings against stub classes
// (tests/bindings/android-api) to check that it builds. Java sees these as `TernAndroid.*`.
@file:JvmName("TernAndroid")

package dev.tern

import android.content.Context

/**
 * Starts measuring energy from the battery gauge (`BatteryManager` current and voltage, polled
 * every 50 ms) for engines loaded from now on; without it their figures are estimated from a
 * power model. Pass the application's [context] (`applicationContext`, or the `Application`).
 * From Java: `TernAndroid.installBatteryMeter(context)`.
 * Throws [TernException.Energy] when the gauge cannot be read.
 */
@Throws(TernException::class)
fun installBatteryMeter(context: Context) = installBatteryMeter(context as Any)
