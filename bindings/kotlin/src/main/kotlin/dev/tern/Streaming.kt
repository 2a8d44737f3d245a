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
 * then one [TokenEvent.Done] with the statistics (just before it a [TokenEvent.ToolCall] when
 * the session has tools and the model calls one). Generation runs on a native thread;
 * collecting never blocks the collector's thread.
 *
 * Cancelling the collecting coroutine (or any operator that stops early, such as `take`) stops
 * the generation within one decoding step. Errors are thrown as [TernException]: `Busy` if this
 * session is still answering an earlier message.
 */
fun Session.stream(text: String): Flow<TokenEvent> = flow {
    send(text).use { tokens -> emitEvents(tokens) }
}

/**
 * Answers the tool call of the last answer with [result] (what the tool returned, usually JSON)
 * and streams the model's next answer, like [stream].
 */
fun Session.streamToolResult(result: String): Flow<TokenEvent> = flow {
    sendToolResult(result).use { tokens -> emitEvents(tokens) }
}

/** The events of an answer already started with [Session.send]; the flow can be collected once. */
fun TokenStream.asFlow(): Flow<TokenEvent> = flow { emitEvents(this@asFlow) }

internal suspend fun FlowCollector<TokenEvent>.emitEvents(tokens: TokenStream) = emitPulled(tokens::next, tokens::cancel)

/**
 * Emits what [next] returns until it returns null. Stopped early, [cancel] tells the native side:
 * cancelled while suspended in `next()`, Rust has already stopped; while in `emit()`, or stopped
 * by the collector (`take`, `first`), it learns it here.
 */
internal suspend fun <T> FlowCollector<T>.emitPulled(next: suspend () -> T?, cancel: () -> Unit) {
    var finished = false
    try {
        while (true) {
            emit(next() ?: break)
        }
        finished = true
    } finally {
        if (!finished) cancel()
    }
}

/** Only the text pieces of an answer's events. */
fun Flow<TokenEvent>.textPieces(): Flow<String> = filterIsInstance<TokenEvent.Token>().map { it.text }

/**
 * A whole answer: its text and statistics, and the tool call it made if it made one (then
 * [text] is empty: run the tool and answer with [Session.replyToolResult]).
 */
data class Reply(val text: String, val stats: Stats, val toolCall: ToolCall? = null)

/** Sends [text] and waits for the whole answer (cancellable like [stream]). */
suspend fun Session.reply(text: String): Reply = stream(text).toReply()

/** Answers the last answer's tool call with [result] and waits for the model's next answer. */
suspend fun Session.replyToolResult(result: String): Reply = streamToolResult(result).toReply()

internal suspend fun Flow<TokenEvent>.toReply(): Reply {
    val answer = StringBuilder()
    var stats: Stats? = null
    var call: ToolCall? = null
    collect { event ->
        when (event) {
            is TokenEvent.Token -> answer.append(event.text)
            is TokenEvent.ToolCall -> call = event.call
            is TokenEvent.Done -> stats = event.stats
        }
    }
    return Reply(answer.toString(), stats ?: throw TernException.Internal("the answer ended without statistics"), call)
}
