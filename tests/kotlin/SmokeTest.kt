// Smoke test of the generated Kotlin bindings on a JVM, against a real model.
// Run by tests/kotlin/run.sh; the model path is the first argument.

import dev.tern.*
import kotlinx.coroutines.*

private var passed = 0
private var failed = 0

private suspend fun check(name: String, body: suspend () -> Unit) {
    try {
        withTimeout(120_000) { body() }
        passed++
        println("ok   $name")
    } catch (e: Throwable) {
        failed++
        println("FAIL $name: $e")
    }
}

private fun expect(cond: Boolean, what: () -> String) {
    if (!cond) throw AssertionError(what())
}

/** Drains a stream: the text, the final stats (null if it ended without Done). */
private suspend fun drain(stream: TokenStream, onToken: (String) -> Unit = {}): Pair<String, Stats?> {
    val text = StringBuilder()
    var stats: Stats? = null
    while (true) {
        when (val ev = stream.next() ?: break) {
            is TokenEvent.Token -> { text.append(ev.text); onToken(ev.text) }
            is TokenEvent.Done -> stats = ev.stats
        }
    }
    return text.toString() to stats
}

fun main(args: Array<String>) {
    runBlocking { run(args) }
    kotlin.system.exitProcess(if (failed == 0) 0 else 1)
}

private suspend fun CoroutineScope.run(args: Array<String>) {
    val modelPath = args.getOrNull(0) ?: error("usage: SmokeTest <model.gguf>")
    var engine: Engine? = null

    check("load engine") {
        engine = loadEngine(modelPath, EngineOptions())
        val info = engine!!.info()
        println("     ${info.architecture} ${info.name}: ${info.nParams} params, ${info.kernels} kernels, " +
            "${info.threads} threads, loaded in ${"%.0f".format(info.loadMs)} ms")
        expect(info.vocabSize > 0u) { "empty vocabulary" }
    }
    val eng = engine ?: run { println("$passed passed, $failed failed"); return }

    check("stream an answer") {
        eng.newSession(SessionOptions(maxTokens = 16u)).use { session ->
            print("     > ")
            val (text, stats) = drain(session.send("What is the capital of France?")) { print(it); System.out.flush() }
            println()
            expect(stats != null) { "no Done event" }
            println("     ${stats!!.generatedTokens} tokens, ${"%.1f".format(stats.decodeTokensPerS)} tokens/s, ${stats.finishReason}")
            expect(stats.generatedTokens in 1u..16u) { "generated ${stats.generatedTokens} tokens" }
            expect(text.contains("Paris")) { "answer does not name Paris: $text" }
        }
    }

    check("bad model path raises ModelNotFound") {
        try {
            loadEngine("/nonexistent/model.gguf", EngineOptions())
            throw AssertionError("no error")
        } catch (e: TernException.ModelNotFound) {
            expect(e.path.contains("nonexistent")) { "path ${e.path}" }
        }
    }

    check("not a model raises InvalidModel") {
        val f = kotlin.io.path.createTempFile("tern", ".gguf").toFile()
        f.writeText("this is not a gguf file at all, just some text")
        try {
            loadEngine(f.path, EngineOptions())
            throw AssertionError("no error")
        } catch (e: TernException.InvalidModel) {
        } finally { f.delete() }
    }

    check("cancel ends the stream") {
        eng.newSession(SessionOptions(maxTokens = 400u, ignoreEos = true)).use { session ->
            val stream = session.send("Write a long story about a cat.")
            var tokens = 0
            val (_, stats) = drain(stream) { if (++tokens == 2) session.cancel() }
            expect(stats != null) { "no Done event" }
            expect(stats!!.finishReason == FinishReason.CANCELLED) { "finish reason ${stats.finishReason}" }
            expect(stats.generatedTokens < 400u) { "generated ${stats.generatedTokens}" }
            expect(stream.next() == null) { "events after Done" }
        }
    }

    check("second send while generating is Busy, then the session is free again") {
        eng.newSession(SessionOptions(maxTokens = 400u, ignoreEos = true)).use { session ->
            val stream = session.send("Count to one hundred.")
            try {
                session.send("Hello")
                throw AssertionError("no error")
            } catch (e: TernException.Busy) {}
            try {
                session.reset()
                throw AssertionError("no error")
            } catch (e: TernException.Busy) {}
            stream.cancel()
            drain(stream)
            val (_, stats) = drain(session.send("Hello"))
            expect(stats != null) { "no Done event" }
            session.reset()
        }
    }

    check("inference does not block the caller's thread") {
        // runBlocking is single-threaded: the ticker only runs while next() is suspended.
        eng.newSession(SessionOptions(maxTokens = 32u, ignoreEos = true)).use { session ->
            var ticks = 0
            val ticker = launch { while (true) { ticks++; yield() ; delay(1) } }
            val (_, stats) = drain(session.send("Tell me about the sea."))
            ticker.cancelAndJoin()
            expect(stats?.generatedTokens == 32u) { "generated ${stats?.generatedTokens}" }
            expect(ticks > 1) { "the caller's thread was blocked (ticks=$ticks)" }
        }
    }

    check("second turn reuses the cache; count_tokens; invalid option") {
        eng.newSession(SessionOptions(maxTokens = 8u)).use { session ->
            drain(session.send("Hi"))
            val (_, stats) = drain(session.send("And again?"))
            expect(stats!!.cachedTokens > 0u) { "no cached tokens" }
            expect(session.countTokens("Hello world") > 0u) { "no tokens" }
        }
        try {
            eng.newSession(SessionOptions(maxTokens = 0u))
            throw AssertionError("no error")
        } catch (e: TernException.InvalidOption) {}
    }

    eng.close()
    println("$passed passed, $failed failed")
}
