// Energy on Android: the OS's thermal status in Tern's terms, and the battery meter that makes
// energy figures measured instead of estimated. Modes, tuning and device state themselves are
// methods of the generated `Engine` (setEnergyMode, tuneEnergy, reportDeviceState, ...).

package dev.tern

/**
 * Android's `PowerManager` thermal status (`THERMAL_STATUS_NONE` = 0 … `THERMAL_STATUS_SHUTDOWN`
 * = 6, from `getCurrentThermalStatus()` or an `OnThermalStatusChangedListener`) as a
 * [ThermalState]: NONE → NOMINAL, LIGHT and MODERATE → FAIR, SEVERE → SERIOUS, CRITICAL and
 * above → CRITICAL.
 */
fun thermalStateOfAndroidStatus(status: Int): ThermalState = when {
    status <= 0 -> ThermalState.NOMINAL
    status <= 2 -> ThermalState.FAIR
    status == 3 -> ThermalState.SERIOUS
    else -> ThermalState.CRITICAL
}

/** The JNI entry of the native library (bindings/ffi/src/android.rs). */
internal object BatteryMeterJni {
    init {
        // JNA has loaded the library already; this registers it for JNI lookups as well.
        System.loadLibrary("tern_ffi")
    }

    /** Null when the meter runs, else why it does not. */
    @JvmStatic
    external fun install(context: Any): String?
}

/**
 * [installBatteryMeter] with its `android.content.Context` (the application's) untyped, for code
 * compiled without Android's classes: this file is also built by the JVM suites, which have none.
 * Apps call the `Context` overload (src/android/kotlin/dev/tern/TernAndroid.kt, `TernAndroid`
 * from Java), which Kotlin picks for a `Context` argument. Android only. Throws
 * [TernException.Energy] when the gauge cannot be read.
 */
fun installBatteryMeter(context: Any) {
    BatteryMeterJni.install(context)?.let { throw TernException.Energy(it) }
}
