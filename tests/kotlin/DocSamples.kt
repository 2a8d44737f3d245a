// The code shown in docs/android.md, compiled and run by the Kotlin suite (BindingsTest.kt).
// Each `snippet:begin NAME` .. `snippet:end` block is copied verbatim into the page;
// `cargo xtask snippets` rewrites the page from here and the test suite fails when they differ.

package dev.tern.samples

import dev.tern.*
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
