// The Kotlin package (generated bindings + bindings/kotlin) on a JVM against the real SmolLM2
// model. Run by tests/kotlin/run.sh:
//   BindingsTestKt MODEL PROMPTS.tsv ANSWERS_DIR
// ANSWERS_DIR/<n>.txt holds the Rust session's greedy answer to the n-th prompt.
// The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.

import dev.tern.*
import dev.tern.samples.*
import java.io.File
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.TimeSource
import kotlinx.coroutines.*
import kotlinx.coroutines.flow.*

/**
 * Compute threads of the suite's engine, as in the Rust reference answers. One: the suite
 * tests the bindings, and a single thread keeps decoding steps short on a busy machine.
 */
val THREADS = 1u

/** Greedy decoding (`SamplingOptions()` as it is): the reference answers are greedy, while a
 * session given no sampling samples as the model recommends. */
val greedy = SamplingOptions()

/** Longest time from a cancellation to the end of the Rust generation. */
val CANCEL_LIMIT = 200.milliseconds

class Case(val maxTokens: UInt, val prompt: String, val expected: String)

private var passed = 0
private var failed = 0

internal suspend fun test(name: String, body: suspend CoroutineScope.() -> Unit) {
    try {
        withTimeout(180_000) { body() }
        passed++
        println("ok   $name")
    } catch (e: Throwable) {
        failed++
        println("FAIL $name: $e")
    }
}

internal fun expect(cond: Boolean, what: () -> String) {
    if (!cond) throw AssertionError(what())
}

internal inline fun <reified E : Throwable> expectThrows(block: () -> Unit): E {
    try {
        block()
    } catch (e: Throwable) {
        if (e is E) return e
        throw AssertionError("expected ${E::class.simpleName}, got $e")
    }
    throw AssertionError("expected ${E::class.simpleName}, nothing was thrown")
}

/** Waits until the session's generation thread has ended; the time it took. */
internal suspend fun untilIdle(session: Session, limit: kotlin.time.Duration = 10_000.milliseconds): kotlin.time.Duration {
    val start = TimeSource.Monotonic.markNow()
    while (session.isBusy()) {
        if (start.elapsedNow() > limit) throw AssertionError("generation did not stop")
        delay(1)
    }
    return start.elapsedNow()
}

private fun readCases(prompts: File, answers: File): List<Case> =
    prompts.readLines().filter { it.isNotBlank() && !it.startsWith("#") }.mapIndexed { n, line ->
        val (max, prompt) = line.split('\t', limit = 2)
        Case(max.toUInt(), prompt, File(answers, "$n.txt").readText())
    }

fun main(args: Array<String>) {
    require(args.size == 3) { "usage: BindingsTestKt MODEL PROMPTS.tsv ANSWERS_DIR" }
    val cases = readCases(File(args[1]), File(args[2]))
    fixtureDir = File(args[1]).absoluteFile.parentFile
    runBlocking { suite(args[0], cases) }
    println("$passed passed, $failed failed")
    kotlin.system.exitProcess(if (failed == 0) 0 else 1)
}

private suspend fun CoroutineScope.suite(model: String, cases: List<Case>) {
    val engine = try {
        Engine.load(model, EngineOptions(threads = THREADS))
    } catch (e: Throwable) {
        failed++
        println("FAIL load engine: $e")
        return
    }
    passed++
    println("ok   load engine (${engine.info().kernels} kernels, ${engine.info().threads} threads)")

    engine.use {
        test("streamed text equals the Rust session's greedy answer") {
            for (case in cases) {
                engine.newSession(SessionOptions(sampling = greedy, maxTokens = case.maxTokens)).use { session ->
                    val events = session.stream(case.prompt).toList()
                    val text = events.filterIsInstance<TokenEvent.Token>().joinToString("") { it.text }
                    expect(text == case.expected) { "prompt '${case.prompt}': got '$text', want '${case.expected}'" }
                    val done = events.last() as? TokenEvent.Done ?: throw AssertionError("last event is not Done")
                    val tokens = events.filterIsInstance<TokenEvent.Token>().sumOf { it.ids.size }
                    expect(done.stats.generatedTokens.toInt() == tokens) { "stats count ${done.stats.generatedTokens}, stream $tokens" }
                    expect(session.lastStats() == done.stats) { "lastStats differs from the Done event" }
                    // The last answer token is in the context once the next request feeds it.
                    val all = done.stats.promptTokens + done.stats.generatedTokens
                    expect(session.tokenCount() in all - 1u..all) { "tokenCount ${session.tokenCount()} after ${done.stats}" }
                }
            }
        }

        test("pull-style next() gives the same answer") {
            val case = cases[0]
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = case.maxTokens)).use { session ->
                session.send(case.prompt).use { stream ->
                    val text = StringBuilder()
                    var done: Stats? = null
                    while (true) {
                        when (val event = stream.next() ?: break) {
                            is TokenEvent.Token -> text.append(event.text)
                            is TokenEvent.Done -> done = event.stats
                            is TokenEvent.ToolCall -> throw AssertionError("a tool call without tools")
                        }
                    }
                    expect(text.toString() == case.expected) { "got '$text'" }
                    expect(done != null) { "no Done event" }
                    expect(stream.next() == null) { "events after Done" }
                }
            }
        }

        test("cancelling the collecting coroutine stops generation within $CANCEL_LIMIT") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 2000u, ignoreEos = true)).use { session ->
                val firstToken = CompletableDeferred<Unit>()
                val job = launch { session.stream("Tell me a very long story.").collect { firstToken.complete(Unit) } }
                firstToken.await()
                delay(30)
                job.cancel()
                val took = untilIdle(session)
                expect(took < CANCEL_LIMIT) { "generation ran on for $took" }
                val stats = session.lastStats() ?: throw AssertionError("no stats")
                expect(stats.finishReason == FinishReason.CANCELLED) { "finish reason ${stats.finishReason}" }
                expect(stats.generatedTokens < 2000u) { "generated ${stats.generatedTokens}" }
            }
        }

        test("cancelling a coroutine awaiting next() stops generation within $CANCEL_LIMIT") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 2000u, ignoreEos = true)).use { session ->
                session.send("Count from one to one thousand.").use { stream ->
                    stream.next() // the first token: generation is decoding now
                    val job = launch { while (stream.next() != null) { /* keep pulling */ } }
                    delay(30)
                    job.cancel()
                    val took = untilIdle(session)
                    expect(took < CANCEL_LIMIT) { "generation ran on for $took" }
                    expect(session.lastStats()?.finishReason == FinishReason.CANCELLED) { "not cancelled" }
                }
            }
        }

        test("Session.cancel() ends the stream with Done(CANCELLED) within $CANCEL_LIMIT") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 2000u, ignoreEos = true)).use { session ->
                var cancelledAt: TimeSource.Monotonic.ValueTimeMark? = null
                var tokens = 0
                val last = session.stream("Write a long poem.").onEach {
                    if (++tokens == 3) {
                        cancelledAt = TimeSource.Monotonic.markNow()
                        session.cancel()
                    }
                }.last()
                val took = cancelledAt!!.elapsedNow()
                expect(last is TokenEvent.Done && last.stats.finishReason == FinishReason.CANCELLED) { "ended with $last" }
                expect(took < CANCEL_LIMIT) { "Done came $took after cancel" }
                // The conversation keeps what was said: the session answers again afterwards.
                expect(session.stream("Thanks.").take(2).toList().size == 2) { "no answer after a cancel" }
            }
        }

        test("two sessions on one engine answer at the same time, each as if alone") {
            val (a, b) = cases[0] to cases[1]
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = a.maxTokens)).use { sa ->
                engine.newSession(SessionOptions(sampling = greedy, maxTokens = b.maxTokens)).use { sb ->
                    val ra = async { sa.reply(a.prompt) }
                    val rb = async { sb.reply(b.prompt) }
                    val (textA, textB) = ra.await().text to rb.await().text
                    expect(textA == a.expected) { "session A: '$textA'" }
                    expect(textB == b.expected) { "session B: '$textB'" }
                }
            }
        }

        test("a second send while answering is Busy; reset empties the context") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 2000u, ignoreEos = true)).use { session ->
                session.send("Count to one hundred.").use { stream ->
                    expectThrows<TernException.Busy> { session.send("Hello") }
                    expectThrows<TernException.Busy> { session.reset() }
                    stream.next() // a token, so the context holds something
                    stream.cancel()
                    while (stream.next() != null) { /* drain */ }
                }
                untilIdle(session)
                expect(session.tokenCount() > 0u) { "nothing in the context after an answer" }
                session.reset()
                expect(session.tokenCount() == 0u) { "tokenCount ${session.tokenCount()} after reset" }
                session.stream(cases[2].prompt).take(1).collect {}
                untilIdle(session)
                expect(session.lastStats()?.cachedTokens == 0u) { "cache reused after reset" }
            }
        }

        test("setMessages rewinds the conversation; the question asked again comes from the cache") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 24u)).use { session ->
                val first = session.reply("Name a color.")
                val second = session.reply("Name another one.")
                val conversation = session.messages()
                val expected = listOf(
                    ConversationMessage(MessageRole.USER, "Name a color."),
                    ConversationMessage(MessageRole.ASSISTANT, first.text),
                    ConversationMessage(MessageRole.USER, "Name another one."),
                    ConversationMessage(MessageRole.ASSISTANT, second.text),
                )
                expect(conversation == expected) { "messages $conversation" }
                val tokens = session.tokenCount()
                session.setMessages(conversation.take(2))
                expect(session.messages() == conversation.take(2)) { "messages ${session.messages()} after setMessages" }
                expect(session.tokenCount() == tokens) { "the KV cache changed before the next request" }
                val again = session.reply("Name another one.")
                expect(again.text == second.text) { "greedy answer '${again.text}', first time '${second.text}'" }
                // Only the prompt's last token is computed again: its logits pick the first answer token.
                expect(again.stats.promptTokens == second.stats.promptTokens) { "prompt ${again.stats} vs ${second.stats}" }
                expect(again.stats.cachedTokens == again.stats.promptTokens - 1u) { "cached ${again.stats.cachedTokens} of ${again.stats.promptTokens}" }
                expect(session.messages() == expected) { "messages ${session.messages()} after asking again" }
            }
        }

        test("prewarm computes the prompt's start; the first answer reuses it unchanged") {
            val options = SessionOptions(sampling = greedy, maxTokens = 16u, systemPrompt = "You are a terse assistant.")
            engine.newSession(options).use { warm ->
                val prewarmed = warm.prewarm()
                expect(prewarmed > 0u && warm.tokenCount() == prewarmed) { "prewarmed $prewarmed" }
                val answer = warm.reply("Name a color.")
                expect(answer.stats.cachedTokens == prewarmed) { "cached ${answer.stats.cachedTokens} of $prewarmed" }
                val cold = engine.newSession(options).use { it.reply("Name a color.") }
                expect(answer.text == cold.text) { "'${answer.text}' after prewarm, '${cold.text}' without" }
            }
        }

        test("state flows: an engine loads or fails, a session is responding while it answers") {
            val states = loadEngine(model, EngineOptions(threads = THREADS))
            val loaded = states.first { it != EngineState.Loading }
            expect(loaded is EngineState.Ready) { "loaded $loaded" }
            (loaded as EngineState.Ready).engine.close()
            val missing = loadEngine("/no/such/model.gguf").first { it != EngineState.Loading }
            expect((missing as? EngineState.Failed)?.error is TernException.ModelNotFound) { "missing $missing" }

            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u)).use { session ->
                val responding = session.responding()
                expect(!responding.value) { "a new session is responding" }
                var duringAnswer = false
                session.stream("Name a color.").collect { if (it is TokenEvent.Token) duringAnswer = duringAnswer || responding.value }
                expect(duringAnswer) { "not responding while the answer streamed" }
                expect(!responding.value) { "still responding after the answer" }
            }
        }

        test("a transcript saved as JSON restores the conversation") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u)).use { session ->
                session.reply("Name a color.")
                val saved = messagesToJson(session.messages())
                expect(saved.startsWith("""[{"role":"user","content":"Name a color."}""")) { "transcript $saved" }
                engine.newSession(SessionOptions(sampling = greedy, maxTokens = 8u)).use { other ->
                    other.setMessages(messagesFromJson(saved))
                    expect(other.messages() == session.messages()) { "restored ${other.messages()}" }
                }
                expectThrows<TernException.InvalidOption> { messagesFromJson("""[{"role": "robot", "content": "x"}]""") }
            }
        }

        test("setMessages while answering is Busy and keeps the conversation") {
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 2000u, ignoreEos = true)).use { session ->
                session.send("Count to one hundred.").use { stream ->
                    stream.next()
                    // The conversation as of the last finished answer: the question joins with its answer.
                    expect(session.messages().isEmpty()) { "messages ${session.messages()} while answering" }
                    expectThrows<TernException.Busy> { session.setMessages(emptyList()) }
                    stream.cancel()
                    while (stream.next() != null) { /* drain */ }
                }
                untilIdle(session)
                val roles = session.messages().map { it.role }
                expect(roles == listOf(MessageRole.USER, MessageRole.ASSISTANT)) { "roles $roles after a stopped answer" }
                session.setMessages(emptyList())
                expect(session.messages().isEmpty()) { "messages ${session.messages()} after setMessages(empty)" }
            }
        }

        test("a bad model path raises ModelNotFound") {
            val e = expectThrows<TernException.ModelNotFound> { Engine.load("/nonexistent/dir/model.gguf") }
            expect(e.path.contains("nonexistent")) { "path ${e.path}" }
        }

        test("a corrupt file raises InvalidModel") {
            val garbage = kotlin.io.path.createTempFile("tern-garbage", ".gguf").toFile()
            val truncated = kotlin.io.path.createTempFile("tern-truncated", ".gguf").toFile()
            try {
                garbage.writeText("this is not a model file, just some text")
                expectThrows<TernException.InvalidModel> { Engine.load(garbage.path) }
                // The real file's first megabyte: a valid header whose tensors lie past the end.
                File(model).inputStream().use { input -> truncated.writeBytes(input.readNBytes(1 shl 20)) }
                val e = expectThrows<TernException.InvalidModel> { Engine.load(truncated.path) }
                expect(e.detail.isNotEmpty()) { "no detail" }
            } finally {
                garbage.delete()
                truncated.delete()
            }
        }

        test("invalid options raise InvalidOption") {
            expectThrows<TernException.InvalidOption> { engine.newSession(SessionOptions(sampling = greedy, maxTokens = 0u)) }
            expectThrows<TernException.InvalidOption> { Engine.load(model, EngineOptions(kernels = "no-such-isa")) }
        }

        test("inference never blocks the caller's thread") {
            // runBlocking runs on this one thread: the ticker only runs while next() is suspended.
            engine.newSession(SessionOptions(sampling = greedy, maxTokens = 32u, ignoreEos = true)).use { session ->
                var ticks = 0
                val ticker = launch { while (true) { ticks++; delay(1) } }
                val reply = session.reply("Tell me about the sea.")
                ticker.cancelAndJoin()
                expect(reply.stats.generatedTokens == 32u) { "generated ${reply.stats.generatedTokens}" }
                expect(ticks > 10) { "the caller's thread was blocked (ticks=$ticks)" }
            }
        }

        test("kernel sets are listed and each one loads") {
            val sets = availableKernels()
            expect(sets.firstOrNull() == "reference") { "sets $sets" }
            Engine.load(model, EngineOptions(kernels = sets.last())).use { e ->
                expect(e.info().kernels == sets.last()) { "loaded with ${e.info().kernels}" }
            }
        }

        test("docs/android.md samples run") {
            loadModel(model).use { e ->
                // The snippet samples as the model recommends, so its answer varies from run to run.
                val answer = askCapital(e)
                expect(answer.isNotBlank()) { "answer '$answer'" }
            }
            // The suite's one-thread engine: see THREADS.
            engine.newSession().use { session ->
                val pieces = mutableListOf<String>()
                val job = startAnswer(this, session, "Tell me a long story.") { pieces += it }
                while (pieces.size < 2) delay(5)
                job.cancelAndJoin()
                expect(untilIdle(session) < CANCEL_LIMIT) { "generation ran on after job.cancel()" }
            }
            expect(loadOrExplain("/nonexistent/model.gguf") == null) { "no error" }
            setLogLevel(LogLevel.OFF)
        }

        structuredTests(engine)
        docSampleTests(engine, model)
        speculationTests(engine)
    }
    storeTests()
    energyTests(model)
}
