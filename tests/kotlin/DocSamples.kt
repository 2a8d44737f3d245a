// The code shown in docs/android.md, compiled and run by the Kotlin suite (BindingsTest.kt).
// Each `snippet:begin NAME` .. `snippet:end` block is copied verbatim into the page;
// `cargo xtask snippets` rewrites the page from here and the test suite fails when they differ.

package dev.tern.samples

import dev.tern.*
import java.io.File
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Job
import kotlinx.coroutines.launch

// snippet:begin load
suspend fun loadModel(path: String): Engine {
    setLogLevel(LogLevel.INFO) // model loaded, answers' counts and timings in logcat (tag "Tern")
    val engine = Engine.load(path, EngineOptions(contextLength = 2048u))
    val info = engine.info()
    println("${info.name}: ${info.nParams} parameters, ${info.kernels} kernels")
    return engine
}
// snippet:end

// snippet:begin stream
suspend fun askCapital(engine: Engine): String {
    val answer = StringBuilder()
    engine.newSession(SessionOptions(maxTokens = 64u)).use { session ->
        session.stream("What is the capital of France?").collect { event ->
            when (event) {
                is TokenEvent.Token -> answer.append(event.text) // show it as it comes
                is TokenEvent.Done -> println("${event.stats.decodeTokensPerS} tokens/s")
                is TokenEvent.ToolCall -> {} // only in sessions with tools (see "Tool calls")
            }
        }
    }
    return answer.toString()
}
// snippet:end

// snippet:begin cancel
// In an app, `scope` is e.g. viewModelScope; a Stop button calls `job.cancel()`, which stops
// the generation within one token.
fun startAnswer(scope: CoroutineScope, session: Session, prompt: String, onText: (String) -> Unit): Job =
    scope.launch {
        session.stream(prompt).textPieces().collect { onText(it) }
    }
// snippet:end

// snippet:begin errors
suspend fun loadOrExplain(path: String): Engine? =
    try {
        Engine.load(path)
    } catch (e: TernException.ModelNotFound) {
        println("no model at ${e.path}")
        null
    } catch (e: TernException.InvalidModel) {
        println("not a usable model file: ${e.detail}")
        null
    } catch (e: TernException) {
        println("cannot load the model: ${e.message}")
        null
    }
// snippet:end

// snippet:begin json
suspend fun planTrip(engine: Engine): String =
    engine.newSession(SessionOptions(maxTokens = 64u)).use { session ->
        session.setGrammar(
            Grammar.JsonSchema(
                """{"type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 40}, "days": {"type": "integer", "minimum": 1, "maximum": 30}},
                    "required": ["city", "days"], "additionalProperties": false}""",
            ),
        )
        session.reply("Plan a trip to Lyon.").text // e.g. {"city": "Lyon", "days": 3}
    }
// snippet:end

// snippet:begin tools
val weather = Tool(
    name = "get_weather",
    description = "Current weather in a city",
    parameters = """{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}""",
)

suspend fun askWithTools(session: Session, question: String, fetchWeather: suspend (arguments: String) -> String): String {
    val handler = ToolHandler(weather, fetchWeather) // {"city": "Paris"} → e.g. {"temperature_c": 18}
    return session.reply(question, listOf(handler), maxCalls = 3).reply.text
}
// snippet:end

// snippet:begin ui
suspend fun nextStep(engine: Engine, screenJson: String, goal: String): UiAction =
    engine.newSession(SessionOptions(systemPrompt = uiSystemPrompt())).use { session ->
        val screen = screenFromJson(screenJson) // {"app": ..., "elements": [{"id", "class", "text", "clickable"}]}
        session.nextAction(screen, goal) // e.g. UiAction(action = TAP, id = 2u)
    }
// snippet:end

// snippet:begin download
suspend fun downloadModel(filesDir: File, url: String, onProgress: (Float) -> Unit): String =
    ModelStore.open(File(filesDir, "models").path).use { store ->
        val spec = knownModel("smollm2")!! // size and SHA-256 of SmolLM2-135M Q4_1
        store.installed(spec) ?: store.fetch(spec, url) { done, total -> onProgress(done.toFloat() / total.toFloat()) }
    }
// snippet:end

// snippet:begin speculation
// One store for the app, kept in its files; each contact's thread is one key of it.
fun openHistory(filesDir: File): HistoryStore = HistoryStore.open(File(filesDir, "history").path)

suspend fun suggestReply(engine: Engine, history: HistoryStore, contact: String, message: String): Reply {
    history.add(contact, message) // their words are drafted from too
    val speculation = SpeculationOptions(history = HistoryScope(history, contact)) // answers join it
    return engine.newSession(SessionOptions(maxTokens = 64u, speculation = speculation)).use { session ->
        val reply = session.reply("Suggest a short reply to: $message")
        val s = reply.stats.speculation
        println("${s.tokensPerStep} tokens per step, ${s.acceptedTokens} of ${s.draftedTokens} drafted accepted")
        reply
    }
}
// snippet:end

// snippet:begin energy
suspend fun loadTuned(path: String, filesDir: File, deviceModel: String): Engine {
    val energy = EnergyOptions(tuningDir = filesDir.path, deviceName = deviceModel) // deviceModel: Build.MODEL
    val engine = Engine.load(path, EngineOptions(energy = energy))
    if (engine.energyTuning() == null) engine.tuneEnergy() // once per device, a few seconds
    return engine
}

// From PowerManager.addThermalStatusListener { status -> onThermalStatus(engine, status) }
fun onThermalStatus(engine: Engine, status: Int, batteryLow: Boolean = false) =
    engine.reportDeviceState(DeviceState(thermalStateOfAndroidStatus(status), batteryLow))
// snippet:end
