// Speculative decoding through the Kotlin package, on the real SmolLM2 model: the greedy answer
// is the same with speculation as without, drafts are verified and accepted, and a HistoryStore
// keyed by contact feeds a later session until it is cleared. Called from BindingsTest.kt.

import dev.tern.*
import dev.tern.samples.*
import kotlinx.coroutines.CoroutineScope

/** A context-heavy request: the summary repeats the passage's words. */
private const val SUMMARY = "Summarise in two sentences: The town library will close for renovation from 3 March " +
    "to 28 April. During the closure, books can be returned to the drop box at the town hall, and the mobile " +
    "library will visit the market square every Saturday morning. The renovated library will have a larger " +
    "children's section, a quiet study room and longer opening hours on weekdays."

/** Every draft verified, whatever it costs on this machine: what is accepted depends on the drafts only. */
private val ALWAYS = Speculation.Limits(DraftLimits(maxDraftTokens = 16u, maxDepth = 12u, adaptive = false))

private suspend fun answer(engine: Engine, speculation: SpeculationOptions, prompt: String): Reply =
    engine.newSession(SessionOptions(sampling = greedy, maxTokens = 48u, speculation = speculation)).use { it.reply(prompt) }

internal suspend fun CoroutineScope.speculationTests(engine: Engine) {
    test("speculation keeps the greedy answer of a summary and accepts drafts") {
        val plain = answer(engine, SpeculationOptions(mode = Speculation.Off), SUMMARY)
        expect(plain.stats.speculation.verifySteps == 0u) { "Off verified drafts: ${plain.stats.speculation}" }
        // Auto verifies where the measured costs say it pays, so how much it drafts varies with
        // the machine's load; the answer does not.
        val auto = answer(engine, SpeculationOptions(), SUMMARY)
        expect(auto.text == plain.text) { "with speculation '${auto.text}', without '${plain.text}'" }
        val a = auto.stats.speculation
        expect(a.acceptedTokens <= a.draftedTokens && a.verifySteps <= a.decodePasses) { "$a" }
        // Every draft verified: the same answer, with drafts accepted from the passage.
        val fast = answer(engine, SpeculationOptions(mode = ALWAYS), SUMMARY)
        expect(fast.text == plain.text) { "with limits '${fast.text}', without '${plain.text}'" }
        val s = fast.stats.speculation
        expect(s.verifySteps > 0u && s.acceptedTokens > 0u && s.calibratedPositions > 0u) { "$s" }
        expect(s.tokensPerStep > 1.0 && s.acceptanceRate > 0.0 && s.acceptanceRate <= 1.0) { "$s" }
        expect(s.draftLengths.size <= 17) { "drafts over 16 tokens: $s" }
        // A single chain without calibration: the same answer again.
        val limits = Speculation.Limits(DraftLimits(maxDraftTokens = 8u, maxWidth = 1u, adaptive = false))
        val chain = answer(engine, SpeculationOptions(mode = limits, calibrationPositions = 0u), SUMMARY)
        expect(chain.text == plain.text) { "as a chain '${chain.text}'" }
        expect(chain.stats.speculation.calibratedPositions == 0u) { "calibrated ${chain.stats.speculation}" }
    }

    test("bad speculation options raise InvalidOption") {
        val none = Speculation.Limits(DraftLimits(maxDraftTokens = 0u))
        expectThrows<TernException.InvalidOption> {
            engine.newSession(SessionOptions(sampling = greedy, speculation = SpeculationOptions(mode = none)))
        }
        val dir = kotlin.io.path.createTempDirectory("tern-history").toFile()
        try {
            expectThrows<TernException.InvalidOption> { HistoryStore.open(dir.path, HistoryOptions(maxBytesPerKey = 0u)) }
            HistoryStore.open(dir.path).use { store -> expectThrows<TernException.InvalidOption> { store.add("", "text") } }
        } finally {
            dir.deleteRecursively()
        }
    }

    test("docs/android.md speculation sample runs and stores the thread") {
        val dir = kotlin.io.path.createTempDirectory("tern-history").toFile()
        try {
            openHistory(dir).use { history ->
                val message = "Are we still on for dinner at the Italian place on Friday at eight?"
                val reply = suggestReply(engine, history, "alice", message)
                expect(reply.text.isNotEmpty()) { "no reply" }
                expect(history.texts("alice") == listOf(message, reply.text)) { "stored ${history.texts("alice")}" }
                expect(reply.stats.speculation.historyError == null) { "${reply.stats.speculation}" }
            }
        } finally {
            dir.deleteRecursively()
        }
    }

    test("a HistoryStore keyed by contact feeds a later session; clearing it forgets") {
        val dir = kotlin.io.path.createTempDirectory("tern-history").toFile()
        val question = "Write a short poem about the sea and the wind at night."
        try {
            HistoryStore.open(dir.path).use { history ->
                val scope = HistoryScope(history, "contact-7")
                val first = answer(engine, SpeculationOptions(mode = ALWAYS, history = scope), question)
                expect(history.texts("contact-7") == listOf(first.text)) { "stored ${history.texts("contact-7")}" }
                // The same request again: its answer is in the scope now, so drafts come from it.
                val again = answer(engine, SpeculationOptions(mode = ALWAYS, history = scope), question)
                val without = answer(engine, SpeculationOptions(mode = ALWAYS), question)
                expect(again.text == first.text && without.text == first.text) { "'${again.text}' vs '${first.text}'" }
                val (a, b) = without.stats.speculation to again.stats.speculation
                expect(b.acceptedTokens > a.acceptedTokens + 10u) { "without history $a, with $b" }
                history.add("contact-8", "See you tomorrow.")
                history.clear("contact-7")
                expect(history.texts("contact-7").isEmpty()) { "the key kept ${history.texts("contact-7")}" }
                expect(history.texts("contact-8") == listOf("See you tomorrow.")) { "another key lost its texts" }
                val readOnly = HistoryScope(history, "contact-7", recordAnswers = false)
                val cleared = answer(engine, SpeculationOptions(mode = ALWAYS, history = readOnly), question)
                expect(cleared.stats.speculation.acceptedTokens < b.acceptedTokens) { "after clear ${cleared.stats.speculation}" }
                expect(history.texts("contact-7").isEmpty()) { "recordAnswers = false stored an answer" }
                expect(history.totalBytes() > 0u) { "the other key's text is on disk" }
                history.clearAll()
                expect(history.totalBytes() == 0uL && history.texts("contact-8").isEmpty()) { "clearAll left texts" }
            }
        } finally {
            dir.deleteRecursively()
        }
    }
}
