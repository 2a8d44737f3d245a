// Structured output, the model store and energy through the Kotlin package, run by
// BindingsTest.kt's suite on the same engine (SmolLM2-135M, greedy).

import com.sun.net.httpserver.HttpServer
import dev.tern.*
import dev.tern.samples.*
import java.io.File
import java.net.InetSocketAddress
import java.security.MessageDigest
import kotlin.random.Random
import kotlin.time.Duration.Companion.milliseconds
import kotlinx.coroutines.*
import kotlinx.coroutines.flow.*

/** Where the inputs shared with the Swift suite are (tests/bindings/); set by main. */
lateinit var fixtureDir: File

private fun fixture(name: String) = File(fixtureDir, name).readText()

/** A screen of the `ui` dev workloads (dev-ui-0). */
val MESSAGES_SCREEN by lazy { fixture("ui-screen.json") }

val TRIP_SCHEMA by lazy { fixture("trip-schema.json") }

val WEATHER_TOOL by lazy {
    Tool(name = "get_weather", description = "Current weather in a city", parameters = fixture("weather-parameters.json"))
}

/** The trip of trip-schema.json as the app's type. */
data class Trip(val city: String, val days: Int) {
    companion object : Generable<Trip> {
        override val jsonSchema get() = TRIP_SCHEMA

        override fun decode(json: String): Trip {
            val value = Json.parse(json) as Map<*, *>
            return Trip(value["city"] as String, (value["days"] as Long).toInt())
        }
    }
}

internal suspend fun CoroutineScope.structuredTests(engine: Engine) {
    test("a JSON Schema answer streams as it grows and parses to the schema") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 64u)).use { session ->
            session.setGrammar(Grammar.JsonSchema(TRIP_SCHEMA))
            val pieces = session.stream("Plan a trip to Lyon.").textPieces().toList()
            val text = pieces.joinToString("")
            expect(pieces.count { it.isNotEmpty() } > 1) { "the JSON came in one piece: $pieces" }
            val value = Json.parse(text) as? Map<*, *> ?: throw AssertionError("not an object: '$text'")
            expect(value.keys == setOf("city", "days")) { "keys of '$text'" }
            expect(value["city"] is String) { "city in '$text'" }
            val days = value["days"] as? Long ?: throw AssertionError("days in '$text'")
            expect(days in 1..30) { "days $days" }
            val stats = session.lastStats()!!
            expect(stats.finishReason == FinishReason.END_OF_GENERATION) { "finish ${stats.finishReason}" }
            expect(stats.constraintMs > 0.0) { "no constraint time" }
            // Lifting the grammar gives free text again.
            session.setGrammar(null)
            expect(session.reply("Thanks!").stats.constraintMs == 0.0) { "constrained after setGrammar(null)" }
        }
    }

    test("a regex grammar holds the answer to it") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 16u)).use { session ->
            session.setGrammar(Grammar.Regex("(yes|no)"))
            val text = session.reply("Is Paris in France? Answer yes or no.").text
            expect(text == "yes" || text == "no") { "answer '$text'" }
        }
    }

    test("a schema the library cannot use raises Grammar before generating; the session still works") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u)).use { session ->
            expectThrows<TernException.Grammar> { session.setGrammar(Grammar.JsonSchema("""{"type": "no-such-type"}""")) }
            expectThrows<TernException.Grammar> { session.setGrammar(Grammar.Lark("start: (")) }
            expect(session.tokenCount() == 0u) { "something was generated" }
            expect(session.reply("Hello").stats.generatedTokens > 0u) { "no answer" }
        }
    }

    test("a required tool call arrives as a typed event, and the tool's result is answered") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 64u)).use { session ->
            session.setTools(listOf(WEATHER_TOOL), ToolChoice.REQUIRED)
            val events = session.stream("What is the weather in Paris?").toList()
            val call = events.filterIsInstance<TokenEvent.ToolCall>().singleOrNull()?.call
                ?: throw AssertionError("no ToolCall event in $events")
            expect(events.last() is TokenEvent.Done) { "ToolCall is not followed by Done" }
            expect(events.filterIsInstance<TokenEvent.Token>().all { it.text.isEmpty() }) { "the call's text streamed" }
            expect(call.name == "get_weather") { "called ${call.name}" }
            val args = Json.parse(call.arguments) as? Map<*, *> ?: throw AssertionError("arguments '${call.arguments}'")
            expect(args.keys == setOf("city") && args["city"] is String) { "arguments '${call.arguments}'" }
            // The app runs the tool and answers; the model then answers in text (it may call again).
            val answer = session.replyToolResult("""{"temperature_c": 18, "sky": "cloudy"}""")
            expect(answer.stats.generatedTokens > 0u) { "no answer to the tool's result" }
            expect(answer.toolCall != null || answer.text.isNotEmpty()) { "empty answer" }
            expect(answer.stats.cachedTokens > 0u) { "the conversation's cache was not reused" }
        }
    }

    test("bad tool definitions raise Grammar") {
        engine.newSession().use { session ->
            expectThrows<TernException.Grammar> { session.setTools(listOf(WEATHER_TOOL.copy(name = "no spaces")), ToolChoice.AUTO) }
            expectThrows<TernException.Grammar> { session.setTools(listOf(WEATHER_TOOL, WEATHER_TOOL), ToolChoice.AUTO) }
            expectThrows<TernException.Grammar> { session.setTools(listOf(WEATHER_TOOL.copy(parameters = "[1]")), ToolChoice.AUTO) }
        }
    }

    test("generate returns the app's own type") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 64u)).use { session ->
            val trip = session.generate("Plan a trip to Lyon.", Trip)
            expect(trip.city.isNotEmpty() && trip.days in 1..30) { "$trip" }
            expect(session.messages().size == 2) { "the turn is not in the conversation" }
        }
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 3u)).use { session ->
            expectThrows<TernException.Constraint> { session.generate("Plan a trip to Lyon.", Trip) }
        }
    }

    test("the tool loop calls the registered handler and answers after its result") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 48u)).use { session ->
            val seen = mutableListOf<String>()
            val result = """{"temperature_c": 18, "sky": "cloudy"}"""
            val weather = ToolHandler(WEATHER_TOOL) { arguments ->
                seen += arguments
                yield() // handlers may suspend
                result
            }
            val done = session.reply("What is the weather in Paris?", listOf(weather), ToolChoice.REQUIRED, maxCalls = 1)
            expect(seen.size == 1 && done.calls.size == 1) { "calls $seen" }
            expect((Json.parse(seen[0]) as? Map<*, *>)?.get("city") is String) { "arguments $seen" }
            expect(done.reply.toolCall == null && done.reply.text.isNotEmpty()) { "answer '${done.reply.text}'" }
            val roles = session.messages().map { it.role }
            expect(roles == listOf(MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT)) { "roles $roles" }
            expect(session.messages()[2].content == result) { "the result is not in the conversation" }
        }
    }

    test("a UI action names an element of its screen") {
        val screen = screenFromJson(MESSAGES_SCREEN)
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 96u, systemPrompt = uiSystemPrompt())).use { session ->
            val action = session.nextAction(screen, "Reply to Alice's message")
            validateUiAction(screen, action)
            val ids = screen.elements.map { it.id }
            expect(action.action == UiActionKind.BACK || action.id in ids) { "action $action" }
            expect(session.lastStats()?.constraintMs ?: 0.0 > 0.0) { "the answer was not constrained" }
            // The next step is free to be anything: the grammar applied to that answer only.
            expect(session.reply("Thanks.").stats.constraintMs == 0.0) { "the action grammar stayed" }
        }
    }

    test("UI actions from elsewhere are checked against the screen") {
        val screen = screenFromJson(MESSAGES_SCREEN)
        val tap = parseUiAction(screen, """I will open it: {"action": "tap", "id": 2}""")
        expect(tap == UiAction(UiActionKind.TAP, 2u, null)) { "parsed $tap" }
        expectThrows<TernException.InvalidAction> { validateUiAction(screen, UiAction(UiActionKind.TAP, 9u)) }
        expectThrows<TernException.InvalidAction> { validateUiAction(screen, UiAction(UiActionKind.TAP, 0u)) }
        expectThrows<TernException.InvalidAction> { parseUiAction(screen, """{"action": "fly", "id": 2}""") }
        expectThrows<TernException.InvalidOption> { screenFromJson("""{"app": "x"}""") }
        expect(uiActionSchema(screen).contains("\"enum\"")) { "schema without the screen's ids" }
    }

    test("cancelling the coroutine awaiting a UI action stops its generation") {
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 96u, systemPrompt = uiSystemPrompt())).use { session ->
            val job = async { session.nextAction(screenFromJson(MESSAGES_SCREEN), "Reply to Alice's message") }
            while (!session.isBusy()) delay(1)
            delay(20)
            job.cancel()
            // Still in the prompt, the answer stops at the end of the current prefill chunk
            // (seconds on a busy machine), so no 200 ms bound here.
            untilIdle(session, limit = 60_000.milliseconds)
            expect(session.lastStats()?.finishReason == FinishReason.CANCELLED) { "not cancelled: ${session.lastStats()}" }
        }
    }
}

/**
 * An HTTP server on 127.0.0.1 that serves [body] at /model.gguf, with ranges (anything else is
 * 404). Its first response can break off after [dropFirstAt] bytes (the connection drops), or
 * pause for a second after [stallFirstAt] bytes.
 */
class ModelServer(
    private val body: ByteArray,
    private val dropFirstAt: Int? = null,
    private val stallFirstAt: Int? = null,
) : AutoCloseable {
    private val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
    val ranges = java.util.Collections.synchronizedList(mutableListOf<String?>())
    val requests get() = ranges.size
    val url get() = "http://127.0.0.1:${server.address.port}/model.gguf"

    init {
        server.executor = java.util.concurrent.Executors.newCachedThreadPool()
        server.createContext("/model.gguf") { exchange ->
            val range = exchange.requestHeaders.getFirst("Range")
            val first = synchronized(ranges) { ranges.add(range); ranges.size == 1 }
            val from = range?.removePrefix("bytes=")?.removeSuffix("-")?.toInt() ?: 0
            if (range != null) exchange.responseHeaders.add("Content-Range", "bytes $from-${body.size - 1}/${body.size}")
            exchange.sendResponseHeaders(if (range != null) 206 else 200, (body.size - from).toLong())
            val out = exchange.responseBody
            try {
                val stall = stallFirstAt?.takeIf { first && it > from }
                if (stall != null) {
                    out.write(body, from, stall - from)
                    out.flush()
                    Thread.sleep(1000)
                }
                val start = stall ?: from
                val end = dropFirstAt?.takeIf { first } ?: body.size
                out.write(body, start, end - start)
                // Short of Content-Length, closing the exchange drops the connection.
                exchange.close()
            } catch (_: java.io.IOException) {
                // The client went away (a cancelled download).
            }
        }
        server.start()
    }

    override fun close() {
        server.stop(0)
        (server.executor as java.util.concurrent.ExecutorService).shutdownNow()
    }
}

fun sha256(bytes: ByteArray): String = MessageDigest.getInstance("SHA-256").digest(bytes).joinToString("") { "%02x".format(it) }

internal suspend fun CoroutineScope.storeTests() {
    val dir = kotlin.io.path.createTempDirectory("tern-store").toFile()
    val body = Random(7).nextBytes(3 * 1024 * 1024 + 123)
    val spec = ModelSpec("test", "test-model.gguf", body.size.toULong(), sha256(body))
    val quick = DownloadOptions(retries = 3u, retryDelayMs = 10u, stallTimeoutMs = 5000u, connectTimeoutMs = 5000u)
    try {
        ModelStore.open(dir.path).use { store ->
            test("a download reports its progress and installs the verified file") {
                ModelServer(body).use { server ->
                    val events = store.download(spec, server.url, quick).toList()
                    expect(events.first() == DownloadEvent.Started(0u, body.size.toULong())) { "first event ${events.first()}" }
                    val progress = events.filterIsInstance<DownloadEvent.Progress>().map { it.downloaded }
                    expect(progress.size >= 3 && progress == progress.sorted() && progress.last() == body.size.toULong()) {
                        "progress $progress"
                    }
                    expect(events[events.size - 2] == DownloadEvent.Verifying) { "events $events" }
                    val path = (events.last() as? DownloadEvent.Done)?.path ?: throw AssertionError("last ${events.last()}")
                    expect(File(path).readBytes().contentEquals(body)) { "the file differs" }
                    expect(store.installed(spec) == path) { "installed ${store.installed(spec)}" }
                    expect(store.list() == listOf(StoredFile("test-model.gguf", body.size.toULong(), true))) { "list ${store.list()}" }
                    // Already there: Done alone, no request.
                    expect(store.fetch(spec, server.url, quick) == path && server.requests == 1) { "downloaded again" }
                    store.verify(spec)
                    expect(store.delete(spec) && store.installed(spec) == null && store.list().isEmpty()) { "not deleted" }
                }
            }

            test("a dropped connection is resumed with a range and the file has the right hash") {
                ModelServer(body, dropFirstAt = body.size / 2).use { server ->
                    var last = 0uL
                    val path = store.fetch(spec, server.url, quick) { downloaded, _ -> last = downloaded }
                    expect(server.ranges.size == 2 && server.ranges[1]?.startsWith("bytes=") == true) { "requests ${server.ranges}" }
                    expect(last == body.size.toULong()) { "progress ended at $last" }
                    expect(sha256(File(path).readBytes()) == spec.sha256) { "wrong bytes" }
                    store.delete(spec)
                }
            }

            test("a corrupted byte is rejected with HashMismatch and nothing is installed") {
                val corrupt = body.copyOf().also { it[body.size / 3] = (it[body.size / 3] + 1).toByte() }
                ModelServer(corrupt).use { server ->
                    val e = expectThrows<TernException.HashMismatch> { store.fetch(spec, server.url, quick) }
                    expect(e.expected == spec.sha256 && e.actual == sha256(corrupt)) { "hashes ${e.expected} ${e.actual}" }
                    expect(store.installed(spec) == null && store.list().isEmpty()) { "left ${store.list()}" }
                }
            }

            test("cancelling the collector cancels the download and keeps the partial file for a resume") {
                ModelServer(body, stallFirstAt = 2 * 1024 * 1024).use { server ->
                    val first = store.download(spec, server.url, quick).filterIsInstance<DownloadEvent.Progress>().first()
                    expect(first.downloaded < body.size.toULong()) { "progress $first" }
                    val partial = store.list().singleOrNull()
                    expect(partial != null && !partial.complete) { "list ${store.list()}" }
                    // The download thread lets go of the file at its next read (the server
                    // pauses for a second); until then the same model is DownloadInProgress.
                    var resumed: String? = null
                    val start = System.nanoTime()
                    while (resumed == null) {
                        try {
                            resumed = store.fetch(spec, server.url, quick)
                        } catch (e: TernException.DownloadInProgress) {
                            expect(System.nanoTime() - start < 5_000_000_000) { "the cancelled download still holds the file" }
                            delay(20)
                        }
                    }
                    expect(server.ranges.last()?.startsWith("bytes=") == true) { "not resumed: ${server.ranges}" }
                    expect(sha256(File(resumed).readBytes()) == spec.sha256) { "wrong bytes" }
                    store.delete(spec)
                }
            }

            test("download errors are typed") {
                ModelServer(body).use { server ->
                    val once = quick.copy(retries = 0u)
                    val e = expectThrows<TernException.Http> { store.fetch(spec, server.url.replace("model.gguf", "missing"), once) }
                    expect(e.status == 404.toUShort()) { "status ${e.status}" }
                    val wrongSize = spec.copy(size = body.size.toULong() + 1u)
                    expectThrows<TernException.SizeMismatch> { store.fetch(wrongSize, server.url, once) }
                    expectThrows<TernException.InvalidOption> { store.fetch(spec.copy(fileName = "../escape.gguf"), server.url, once) }
                    // A refused connection is retried like a broken one; without retries left
                    // the download is interrupted before its first byte.
                    val refused = expectThrows<TernException.DownloadInterrupted> { store.fetch(spec, "http://127.0.0.1:1/refused", once) }
                    expect(refused.downloaded == 0uL) { "downloaded ${refused.downloaded}" }
                    expect(store.list().all { !it.complete }) { "installed ${store.list()}" }
                    store.delete(spec)
                }
            }
        }
    } finally {
        dir.deleteRecursively()
    }
}

internal suspend fun CoroutineScope.energyTests(model: String) {
    val dir = kotlin.io.path.createTempDirectory("tern-energy").toFile()
    val options = EngineOptions(energy = EnergyOptions(tuningDir = dir.path, deviceName = "jvm-suite"))
    try {
        test("energy mode set and get; a throttled or low-battery device decodes in power saver") {
            Engine.load(model, options.copy(threads = THREADS)).use { engine ->
                val status = engine.energyStatus()
                expect(status.mode == EnergyMode.Balanced && status.effectiveMode == EnergyMode.Balanced) { "status $status" }
                expect(!status.tuned && status.decode == null && status.meter.isNotEmpty()) { "untuned status $status" }
                engine.setEnergyMode(EnergyMode.Performance)
                expect(engine.energyStatus().mode == EnergyMode.Performance) { "mode ${engine.energyStatus().mode}" }
                engine.reportDeviceState(DeviceState(ThermalState.SERIOUS))
                engine.energyStatus().let { expect(it.mode == EnergyMode.Performance && it.effectiveMode == EnergyMode.PowerSaver) { "throttled $it" } }
                engine.reportDeviceState(DeviceState(ThermalState.NOMINAL, batteryLow = true))
                expect(engine.energyStatus().effectiveMode == EnergyMode.PowerSaver) { "battery low ${engine.energyStatus()}" }
                engine.reportDeviceState(DeviceState(thermalStateOfAndroidStatus(1)))
                engine.energyStatus().let { expect(it.effectiveMode == EnergyMode.Performance && it.device.thermal == ThermalState.FAIR) { "cleared $it" } }
                val custom = EnergyMode.Custom(prefill = CoreSelection.Threads(1u), decode = CoreSelection.Threads(1u))
                engine.setEnergyMode(custom)
                engine.energyStatus().let { expect(it.decode == CoreSelection.Threads(1u) && it.prefill == CoreSelection.Threads(1u)) { "custom $it" } }
                val missing = EnergyMode.Custom(prefill = CoreSelection.Cores(listOf(99999u)), decode = CoreSelection.Threads(1u))
                expectThrows<TernException.InvalidOption> { engine.setEnergyMode(missing) }
                expect(engine.energyStatus().mode == custom) { "a refused mode changed it: ${engine.energyStatus().mode}" }
                val stats = engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u, ignoreEos = true)).use { it.reply("Hello").stats }
                val decode = stats.energy.decode
                expect(decode.selection == CoreSelection.Threads(1u)) { "decoded on ${decode.selection}" }
                expect((decode.joulesPerToken ?: 0.0) > 0.0 && (decode.cpuMsPerToken ?: 0.0) > 0.0) { "decode energy $decode" }
                expect(stats.energy.kind == engine.energyStatus().meterKind) { "kind ${stats.energy.kind}" }
            }
        }

        test("tuning finds decode selections, applies and stores them; a new engine reuses them") {
            val tuning = Engine.load(model, options).use { engine ->
                expect(engine.energyTuning() == null) { "tuned before tuning" }
                val t = engine.tuneEnergy()
                expect(t.probes > 0u && t.fastestTokensPerS > 0.0 && t.balanced.tokensPerS > 0.0) { "tuning $t" }
                expect(t.balanced.maxSlowdown == 0.08 && t.powerSaver.maxSlowdown == 0.25) { "bounds $t" }
                expect(engine.energyTuning() == t) { "not kept" }
                val status = engine.energyStatus()
                expect(status.tuned && status.decode == t.balanced.selection) { "status $status" }
                val stats = engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u, ignoreEos = true)).use { it.reply("Hello").stats }
                expect(stats.energy.decode.selection == t.balanced.selection) { "decoded on ${stats.energy.decode.selection}" }
                t
            }
            expect(dir.listFiles()!!.any { it.name.startsWith("tern-energy-") && it.name.endsWith(".json") }) { "nothing stored in $dir" }
            Engine.load(model, options).use { again ->
                val reused = again.energyTuning() ?: throw AssertionError("the stored tuning was not found")
                expect(reused.balanced.selection == tuning.balanced.selection && reused.tunedAt == tuning.tunedAt) { "reused $reused" }
            }
            // Another device name is another key: no tuning there.
            Engine.load(model, EngineOptions(energy = EnergyOptions(tuningDir = dir.path, deviceName = "other"))).use {
                expect(it.energyTuning() == null) { "another device's tuning was used" }
            }
        }
    } finally {
        dir.deleteRecursively()
    }
}

internal suspend fun CoroutineScope.docSampleTests(engine: Engine, model: String) {
    test("docs/android.md structured output samples run") {
        val trip = Json.parse(planTrip(engine)) as? Map<*, *>
        expect(trip?.keys == setOf("city", "days")) { "trip $trip" }
        engine.newSession(SessionOptions(sampling = greedy, maxTokens = 64u)).use { session ->
            askWithTools(session, "What is the weather in Paris?") { arguments ->
                expect((Json.parse(arguments) as? Map<*, *>)?.containsKey("city") == true) { "arguments $arguments" }
                """{"temperature_c": 18}"""
            }
        }
        validateUiAction(screenFromJson(MESSAGES_SCREEN), nextStep(engine, MESSAGES_SCREEN, "Reply to Alice's message"))
    }

    test("docs/android.md download and energy samples run") {
        val dir = kotlin.io.path.createTempDirectory("tern-docs").toFile()
        try {
            // The real SmolLM2 file, served on loopback: its size and hash are the manifest's.
            ModelServer(File(model).readBytes()).use { server ->
                var progress = 0f
                val path = downloadModel(dir, server.url) { progress = it }
                expect(progress == 1f) { "progress ended at $progress" }
                Engine.load(path, EngineOptions(threads = THREADS)).use { expect(it.info().nParams > 0u) { "loaded ${it.info()}" } }
                expect(downloadModel(dir, server.url) {} == path && server.requests == 1) { "downloaded twice" }
            }
            loadTuned(model, dir, "docs-sample").use { engine ->
                expect(engine.energyTuning() != null) { "not tuned" }
                onThermalStatus(engine, 3) // THERMAL_STATUS_SEVERE
                expect(engine.energyStatus().effectiveMode == EnergyMode.PowerSaver) { "status ${engine.energyStatus()}" }
            }
        } finally {
            dir.deleteRecursively()
        }
    }
}
