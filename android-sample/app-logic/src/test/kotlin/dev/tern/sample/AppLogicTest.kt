// The sample's logic (app-logic) on a JVM against the real SmolLM2 model, run by
// tests/android-sample/run.sh:
//   dev.tern.sample.AppLogicTestKt MODEL CASES_DIR
// CASES_DIR holds the dev workloads' `ui` and `reply` cases (tests/samples/cases.py).
// The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.

package dev.tern.sample

import dev.tern.*
import java.io.File
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.TimeSource
import kotlinx.coroutines.*
import kotlinx.coroutines.flow.first

/** One compute thread: short decoding steps on a busy machine, and the answers of the Rust reference. */
private val THREADS = 1u

private var passed = 0
private var failed = 0

suspend fun test(name: String, body: suspend CoroutineScope.() -> Unit) {
    try {
        withTimeout(180_000) { coroutineScope { body() } }
        passed++
        println("ok   $name")
    } catch (e: Throwable) {
        failed++
        println("FAIL $name: $e")
    }
}

fun expect(cond: Boolean, what: () -> String) {
    if (!cond) throw AssertionError(what())
}

private val greedy = ChatSettings(maxTokens = 24u, temperature = 0f)

/** Speculation within the default bounds that verifies every draft (no cost model). */
private val verifyAll = Speculation.Limits(DraftLimits(adaptive = false))

fun main(args: Array<String>) {
    require(args.size == 2) { "usage: AppLogicTestKt MODEL CASES_DIR" }
    val cases = File(args[1])
    runBlocking {
        val engine = Engine.load(args[0], EngineOptions(threads = THREADS))
        engine.use {
            chat(engine)
            replies(engine, File(cases, "reply"))
            agent(engine, File(cases, "ui"))
            modelPicker(args[0])
        }
    }
    println("$passed passed, $failed failed")
    kotlin.system.exitProcess(if (failed == 0) 0 else 1)
}

/** The greedy answer of a plain session, the reference for what the chat shows. */
private suspend fun plainAnswer(engine: Engine, question: String, maxTokens: UInt): String =
    engine.newSession(SessionOptions(sampling = SamplingOptions(), maxTokens = maxTokens)).use { it.reply(question).text }

private suspend fun CoroutineScope.chat(engine: Engine) {
    test("chat streams the answer into its state, with the engine's figures at the end") {
        val question = "What is the capital of France?"
        val expected = plainAnswer(engine, question, greedy.maxTokens)
        ChatViewModel(engine, this, greedy).use { chat ->
            val partials = mutableListOf<String>()
            val watcher = launch { chat.state.collect { s -> s.messages.lastOrNull()?.takeIf { it.streaming }?.let { partials += it.text } } }
            expect(chat.send(question)) { "send refused" }
            val done = chat.state.first { !it.generating }
            watcher.cancel()
            expect(done.error == null) { "error: ${done.error}" }
            val answer = done.messages.last()
            expect(answer.role == Role.ASSISTANT && answer.text == expected) { "shown '${answer.text}', plain session '$expected'" }
            expect(partials.distinct().size >= 3) { "the answer did not stream: ${partials.distinct()}" }
            expect(partials.filter { it.isNotEmpty() }.all { expected.startsWith(it) }) { "a partial text is not a prefix" }
            val m = answer.metrics ?: throw AssertionError("no figures")
            expect(m.tokens in 1..24 && (m.timeToFirstTokenMs ?: 0.0) > 0 && (m.tokensPerSecond ?: 0.0) > 0) { "figures $m" }
            expect(done.energyMode != null) { "no energy mode" }
            val energy = m.energy?.let { "%.1f mJ/token (%s, %s)".format(it.millijoulesPerToken, if (it.measured) "measured" else "estimated", it.meter) }
            println("     TTFT ${"%.0f".format(m.timeToFirstTokenMs)} ms, ${"%.1f".format(m.tokensPerSecond)} tokens/s, ${m.tokens} tokens, energy mode ${done.energyMode}, ${energy ?: "no energy figure"}")
        }
    }

    test("stop ends the answer where it is; a follow-up reuses the conversation") {
        ChatViewModel(engine, this, greedy.copy(maxTokens = 200u)).use { chat ->
            chat.send("Write a long story about a dragon who learns to bake bread.")
            chat.state.first { s -> s.messages.last().let { it.role == Role.ASSISTANT && (it.metrics?.tokens ?: 0) >= 3 } }
            val stoppedAt = TimeSource.Monotonic.markNow()
            chat.stop()
            val done = chat.state.first { !it.generating }
            expect(stoppedAt.elapsedNow() < 500.milliseconds) { "stop took ${stoppedAt.elapsedNow()}" }
            val answer = done.messages.last()
            expect(answer.stopped && answer.metrics?.finishReason == "CANCELLED") { "not marked stopped: $answer" }
            expect((answer.metrics?.tokens ?: 200) < 200) { "ran to the limit" }
            expect(chat.send("Give it a name.")) { "follow-up refused" }
            val second = chat.state.first { !it.generating }
            expect(second.error == null && second.messages.size == 4) { "after follow-up: $second" }
            val cached = second.messages.last().metrics?.cachedTokens ?: 0
            expect(cached > 0) { "the follow-up reused no tokens" }
        }
    }

    test("the energy mode switches for the engine and shows in the state") {
        ChatViewModel(engine, this, greedy).use { chat ->
            chat.setEnergyMode(EnergyMode.PowerSaver)
            expect(chat.state.value.energyMode == "Power saver") { "mode ${chat.state.value.energyMode}" }
            chat.setEnergyMode(EnergyMode.Balanced)
            expect(chat.state.value.energyMode == "Balanced") { "mode ${chat.state.value.energyMode}" }
        }
    }

    test("regenerate answers the last question again; greedy gives the same text") {
        ChatViewModel(engine, this, greedy.copy(maxTokens = 12u)).use { chat ->
            chat.send("Name a fruit.")
            chat.state.first { !it.generating }
            chat.send("And a vegetable?")
            val before = chat.state.first { !it.generating }.messages
            expect(chat.regenerate()) { "regenerate refused" }
            val after = chat.state.first { s -> !s.generating && s.messages.size == 4 && !s.messages.last().streaming }
            expect(after.error == null) { "error: ${after.error}" }
            expect(after.messages.map { it.text } == before.map { it.text }) { "before ${before.map { it.text }}, after ${after.messages.map { it.text }}" }
            // The same session: the question itself comes from the KV cache now, the first turn did before.
            val (first, again) = before.last().metrics?.cachedTokens to after.messages.last().metrics?.cachedTokens
            expect(first != null && again != null && again > first) { "cached tokens: first answer $first, regenerated $again" }
        }
    }

    test("regenerate drops the last question and what follows it, unless sending it failed") {
        val q1 = ConversationMessage(MessageRole.USER, "Name a fruit.")
        val a1 = ConversationMessage(MessageRole.ASSISTANT, "Apple.")
        val q2 = ConversationMessage(MessageRole.USER, "And a vegetable?")
        val a2 = ConversationMessage(MessageRole.ASSISTANT, "Carrot.")
        expect(conversationBefore(listOf(q1, a1, q2, a2), q2.content) == listOf(q1, a1)) { "after an answer" }
        expect(conversationBefore(listOf(q1, a1, q2), q2.content) == listOf(q1, a1)) { "without an answer" }
        expect(conversationBefore(listOf(q1, a1), q2.content) == listOf(q1, a1)) { "the question never joined" }
    }

    test("regenerate with a seed continues the session's random stream") {
        val seeded = ChatSettings(maxTokens = 12u, temperature = 0.9f, seed = 7uL)
        val expected = engine.newSession(seeded.sessionOptions()).use { session ->
            session.reply("Name a fruit.")
            session.reply("And a vegetable?")
            session.setMessages(session.messages().take(2))
            session.reply("And a vegetable?").text
        }
        ChatViewModel(engine, this, seeded).use { chat ->
            chat.send("Name a fruit.")
            chat.state.first { !it.generating }
            chat.send("And a vegetable?")
            chat.state.first { !it.generating }
            expect(chat.regenerate()) { "regenerate refused" }
            val after = chat.state.first { s -> !s.generating && s.messages.size == 4 && !s.messages.last().streaming }
            expect(after.error == null) { "error: ${after.error}" }
            expect(after.messages.last().text == expected) { "regenerated '${after.messages.last().text}', session '$expected'" }
        }
    }

    test("cancelling the view model's scope stops the generation in Rust") {
        val scope = CoroutineScope(coroutineContext + Job())
        val chat = ChatViewModel(engine, scope, greedy.copy(maxTokens = 200u))
        chat.send("Tell me everything about the history of Rome.")
        chat.state.first { (it.messages.last().metrics?.tokens ?: 0) >= 2 }
        val cancelledAt = TimeSource.Monotonic.markNow()
        scope.cancel()
        scope.coroutineContext[Job]!!.join()
        while (chat.answering && cancelledAt.elapsedNow() < 2_000.milliseconds) delay(1)
        val stoppedIn = cancelledAt.elapsedNow()
        val last = chat.state.value.messages.last()
        expect(last.stopped && !last.streaming) { "answer after cancel: $last" }
        expect(stoppedIn < 200.milliseconds) { "the generation ran on for $stoppedIn" }
        chat.close()
        println("     generation stopped ${stoppedIn.inWholeMilliseconds} ms after the cancel")
    }
}

/** A dev workload's reply case: the user's name, the thread before, the incoming message. */
private class ReplyCase(val id: String, val me: String, val thread: ContactThread, val incoming: String)

private fun readReplyCase(file: File): ReplyCase {
    val lines = file.readLines().filter { it.isNotBlank() }
    val me = lines.first()
    val rows = lines.drop(1).map { it.split('\t', limit = 2) }
    val contactName = rows.first { it[0] != me }[0]
    val messages = rows.dropLast(1).map { ThreadMessage(fromMe = it[0] == me, text = it[1]) }
    return ReplyCase(file.nameWithoutExtension, me, ContactThread(Contact(contactName, contactName), messages), rows.last()[1])
}

private suspend fun CoroutineScope.replies(engine: Engine, dir: File) {
    test("threads: a reply joins the contact's thread with the message it answers") {
        val book = ThreadBook.withDemoThreads()
        val incoming = book.pending.value.first()
        val before = book.thread(incoming.contact).messages.size
        book.replied(incoming, "sure thing, the more the merrier")
        val thread = book.thread(incoming.contact)
        expect(incoming !in book.pending.value) { "still pending" }
        expect(thread.messages.size == before + 2) { "thread has ${thread.messages.size} messages" }
        expect(thread.messages.takeLast(2) == listOf(ThreadMessage(false, incoming.text), ThreadMessage(true, "sure thing, the more the merrier"))) {
            "thread ends ${thread.messages.takeLast(2)}"
        }
        val suggester = ReplySuggester(engine, "Sam")
        expect(suggester.userMessage(thread, "see you!").contains("Sam: sure thing, the more the merrier\n${incoming.contact.name}: see you!")) {
            "the prompt does not show the thread"
        }
        expect(cleanReply("Sam: \"ok, see you\"\nmore text", "Sam") == "ok, see you") { "cleanReply" }
    }

    val cases = dir.listFiles { f -> f.name.endsWith(".tsv") }!!.sortedBy { it.name }.map(::readReplyCase)
    val historyDir = File(System.getProperty("java.io.tmpdir"), "tern-sample-history-${ProcessHandle.current().pid()}")
    val history = HistoryStore.open(historyDir.path)
    try {
        test("the contact's history: seeded from the thread once, then what the user sends") {
            val suggester = ReplySuggester(engine, "Sam", history = history)
            val (priya, mom) = ThreadBook.withDemoThreads().threads.value.values.sortedBy { it.contact.key }.let { it[1] to it[0] }
            suggester.seedHistory(priya)
            suggester.seedHistory(priya.with(ThreadMessage(true, "not seeded twice")))
            expect(history.texts(priya.contact.key) == priya.messages.map { it.text }) { "history ${history.texts(priya.contact.key)}" }
            suggester.remember(priya.contact, ThreadMessage(true, "see you at 6"))
            expect(history.texts(priya.contact.key).last() == "see you at 6") { "the sent reply is not kept" }
            expect(history.texts(mom.contact.key).isEmpty()) { "contacts share a history" }
            history.clear(priya.contact.key)
        }

        test("reply suggestions for the ${cases.size} reply workloads: speculation from the contact's history, same answer, speed-up") {
            expect(cases.isNotEmpty()) { "no reply cases in $dir" }
            val speedUps = mutableListOf<Double>()
            var verifySteps = 0
            for (case in cases) {
                // Verifying whatever is drafted: automatic speculation decides from timings, which on a
                // busy machine may verify nothing at all; the answer must be the same either way.
                val suggester = ReplySuggester(engine, case.me, maxTokens = 32u, history = history, speculation = verifyAll)
                val prompt = suggester.userMessage(case.thread, case.incoming)
                expect(prompt.endsWith("${case.thread.contact.name}: ${case.incoming}\n\nWrite ${case.me}'s reply to the last message.")) { prompt }
                history.clear(case.thread.contact.key)
                suggester.seedHistory(case.thread)
                val c = suggester.compare(case.thread, case.incoming)
                val s = c.speculative
                expect(s.text.isNotBlank() && !s.text.startsWith("${case.me}:")) { "${case.id}: suggestion '${s.text}'" }
                expect(c.identical) { "${case.id}: speculation changed the answer: '${c.plain.answer}' vs '${s.answer}'" }
                expect(s.tokens in 1..32 && s.decodeTokensPerS > 0 && c.plain.decodeTokensPerS > 0) { "${case.id}: figures $s" }
                expect(c.plain.speculation.verifySteps == 0u && c.plain.tokensPerStep == 1.0) { "${case.id}: plain decoding speculated: ${c.plain.speculation}" }
                // A case with nothing to draft decodes plainly.
                val spec = s.speculation
                expect(spec.acceptedTokens <= spec.draftedTokens && (spec.verifySteps > 0u || s.tokensPerStep == 1.0) && s.tokensPerStep >= 1.0) {
                    "${case.id}: speculation $spec"
                }
                verifySteps += spec.verifySteps.toInt()
                speedUps += c.speedUp
                println(
                    "     ${case.id}: '${s.text}' (${s.tokens} tokens; ${"%.1f".format(c.plain.decodeTokensPerS)} -> " +
                        "${"%.1f".format(s.decodeTokensPerS)} tokens/s, speed-up ${"%.2f".format(c.speedUp)}x; " +
                        "${s.speculation.verifySteps} verify steps, ${s.speculation.acceptedTokens}/${s.speculation.draftedTokens} " +
                        "drafted tokens accepted, ${"%.2f".format(s.tokensPerStep)} tokens/step)",
                )
            }
            expect(verifySteps > 0) { "speculation verified no draft in any reply case" }
            println("     median speed-up ${"%.2f".format(speedUps.sorted()[speedUps.size / 2])}x, $verifySteps verify steps (one run each, timings are noisy)")
        }
    } finally {
        history.clearAll()
        historyDir.deleteRecursively()
    }
}
