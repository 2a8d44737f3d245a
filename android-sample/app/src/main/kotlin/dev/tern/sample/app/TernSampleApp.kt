// The process-wide state: the engine of the chosen model (one per app; every screen opens its
// own sessions on it), the model store and the message threads.

package dev.tern.sample.app

import android.app.Application
import android.os.Build
import android.os.PowerManager
import androidx.core.content.ContextCompat
import dev.tern.DeviceState
import dev.tern.Engine
import dev.tern.EngineOptions
import dev.tern.HistoryStore
import dev.tern.EnergyOptions
import dev.tern.LogLevel
import dev.tern.ModelStore
import dev.tern.TernException
import dev.tern.ThermalState
import dev.tern.installBatteryMeter
import dev.tern.setLogLevel
import dev.tern.thermalStateOfAndroidStatus
import dev.tern.sample.ThreadBook
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch

class TernSampleApp : Application() {
    /** Work that outlives a screen: loading a model, downloads. */
    val appScope = CoroutineScope(SupervisorJob() + Dispatchers.Main)

    lateinit var store: ModelStore
        private set

    /** Each contact's past messages and sent replies, which speculative decoding drafts replies from. */
    lateinit var history: HistoryStore
        private set

    /** Conversations per contact, filled by the notification listener and the demo. */
    val threads = ThreadBook.withDemoThreads()

    private val _engine = MutableStateFlow<EngineState>(EngineState.None)
    val engine: StateFlow<EngineState> = _engine.asStateFlow()

    override fun onCreate() {
        super.onCreate()
        instance = this
        setLogLevel(LogLevel.INFO)
        // Measured energy per token from the battery gauge; without it the figures are estimated.
        try {
            installBatteryMeter(this)
        } catch (e: TernException.Energy) {
            android.util.Log.i("TernSample", "energy figures will be estimated: ${e.message}")
        }
        store = ModelStore.open(filesDir.resolve("models").path)
        history = HistoryStore.open(filesDir.resolve("history").path)
        watchDeviceState()
        // The last model used, if it is still in the store.
        prefs.getString(KEY_MODEL, null)?.let { path -> if (java.io.File(path).exists()) load(path) }
    }

    // snippet:begin load
    /** Loads [path] (a verified file of the store) and makes it the app's engine. */
    fun load(path: String) {
        val old = (_engine.value as? EngineState.Ready)?.engine
        _engine.value = EngineState.Loading(path)
        appScope.launch {
            _engine.value = try {
                val options = EngineOptions(
                    contextLength = 2048u,
                    energy = EnergyOptions(tuningDir = filesDir.resolve("tern").path, deviceName = Build.MODEL),
                )
                val engine = Engine.load(path, options)
                prefs.edit().putString(KEY_MODEL, path).apply()
                old?.close()
                EngineState.Ready(engine, path)
            } catch (e: dev.tern.TernException) {
                EngineState.Failed(path, e.message ?: e.toString())
            }
        }
    }
    // snippet:end

    /**
     * Tells the engine when the phone gets hot or the battery low: decode then moves to the
     * power-saver cores until it passes (Android 10+ reports thermal status).
     */
    private fun watchDeviceState() {
        fun report() {
            val engine = (_engine.value as? EngineState.Ready)?.engine ?: return
            val thermal = if (Build.VERSION.SDK_INT >= 29) thermalStateOfAndroidStatus(powerManager.currentThermalStatus) else ThermalState.NOMINAL
            engine.reportDeviceState(DeviceState(thermal = thermal, batteryLow = powerManager.isPowerSaveMode))
        }
        if (Build.VERSION.SDK_INT >= 29) powerManager.addThermalStatusListener(mainExecutor) { report() }
        ContextCompat.registerReceiver(
            this,
            object : android.content.BroadcastReceiver() {
                override fun onReceive(context: android.content.Context, intent: android.content.Intent) = report()
            },
            android.content.IntentFilter(PowerManager.ACTION_POWER_SAVE_MODE_CHANGED),
            ContextCompat.RECEIVER_NOT_EXPORTED,
        )
        appScope.launch { engine.collect { report() } }
    }

    private val prefs get() = getSharedPreferences("tern-sample", MODE_PRIVATE)

    val powerManager: PowerManager get() = getSystemService(PowerManager::class.java)

    companion object {
        private const val KEY_MODEL = "model"

        /** Services reach the app's state through this (they run in the same process). */
        lateinit var instance: TernSampleApp
            private set
    }
}

sealed interface EngineState {
    data object None : EngineState
    data class Loading(val path: String) : EngineState
    data class Ready(val engine: Engine, val path: String) : EngineState
    data class Failed(val path: String, val message: String) : EngineState
}
