// The idiomatic layer over the generated bindings (tern_ffi.kt, generated into the same package):
// answers as a cold Flow, and a one-call reply. Loading (`Engine.load`, a suspend function),
// options (data classes with defaults), errors (`TernException`) and closing (`AutoCloseable`)
// come from the generated code as they are.

package dev.tern

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.FlowCollector
import kotlinx.coroutines.flow.filterIsInstance
import kotlinx.coroutines.flow.flow
import kotlinx.coroutines.flow.map

/**
 * Sends [text] when the flow is collected and emits the answer's events: [TokenEvent.Token]s,
 * then one [TokenEvent.Done] with the statistics. Generation runs on a native thread; collecting
 * never blocks the collector's thread.
 *
 * Cancelling the collecting coroutine (or any operator that stops early, such as `take`) stops
 * the generation within one decoding step. Errors are thrown as [TernException]: `Busy` if this
 * session is still answering an earlier message.
 */
fun Session.stream(text: String): Flow<TokenEvent> = flow {
    send(text).use { tokens -> emitEvents(tokens) }
}

/** The events of an answer already started with [Session.send]; the flow can be collected once. */
fun TokenStream.asFlow(): Flow<TokenEvent> = flow { emitEvents(this@asFlow) }

private suspend fun FlowCollector<TokenEvent>.emitEvents(tokens: TokenStream) {
    var finished = false
    try {
        while (true) {
            val event = tokens.next() ?: break
            emit(event)
        }
        finished = true
    } finally {
        // Cancelled while suspended in next(), Rust has already stopped; while in emit(), or
        // stopped early by the collector, it is told here.
        if (!finished) tokens.cancel()
    }
}

/** Only the text pieces of an answer's events. */
fun Flow<TokenEvent>.textPieces(): Flow<String> = filterIsInstance<TokenEvent.Token>().map { it.text }

/** A whole answer: its text and statistics. */
data class Reply(val text: String, val stats: Stats)

/** Sends [text] and waits for the whole answer (cancellable like [stream]). */
suspend fun Session.reply(text: String): Reply {
    val answer = StringBuilder()
    var stats: Stats? = null
    stream(text).collect { event ->
        when (event) {
            is TokenEvent.Token -> answer.append(event.text)
            is TokenEvent.Done -> stats = event.stats
        }
    }
    return Reply(answer.toString(), stats ?: throw TernException.Internal("the answer ended without statistics"))
}
