// The Auto-reply screen's logic: for a message that just came in from a contact, suggest the
// user's reply in their own style, from that contact's earlier messages.

package dev.tern.sample

import dev.tern.Engine
import dev.tern.SessionOptions
import dev.tern.Stats
import dev.tern.TernException
import dev.tern.TokenEvent
import dev.tern.stream

/** A person the user writes with; [key] is stable (a phone number, a notification's key). */
data class Contact(val key: String, val name: String)

/** One message of a thread: the user's own ([fromMe]) or the contact's. */
data class ThreadMessage(val fromMe: Boolean, val text: String)

/** A conversation with one contact, oldest message first. */
data class ContactThread(val contact: Contact, val messages: List<ThreadMessage>) {
    fun with(message: ThreadMessage) = copy(messages = messages + message)
}

/** A suggested reply, with the figures of the answer that produced it. */
data class ReplySuggestion(
    val text: String,
    val tokens: Int,
    val timeToFirstTokenMs: Double,
    val decodeTokensPerS: Double,
    val totalMs: Double,
    /**
     * Tokens per decoding step, counted from the stream: each token event carries the tokens of
     * one forward pass, so above 1 speculative decoding accepted drafted tokens (drafted from the
     * thread in the prompt); exactly 1 means plain decoding.
     */
    val tokensPerStep: Double,
)

/**
 * Suggests replies in the user's style. The prompt holds the contact's thread (the user's own
 * earlier messages show the style) and ends with the incoming message, in the form of the
 * `reply` workloads; each suggestion is a fresh session, so threads never mix.
 */
class ReplySuggester(
    private val engine: Engine,
    /** The user's name, as the contact's messages address them. */
    private val me: String,
    private val maxTokens: UInt = 48u,
    /** How many of the thread's latest messages go into the prompt. */
    private val historyMessages: Int = 12,
) {
    /** Suggests the user's reply to [incoming], the contact's newest message (not yet in [thread]). */
    suspend fun suggest(thread: ContactThread, incoming: String): ReplySuggestion {
        val options = SessionOptions(systemPrompt = systemPrompt(), maxTokens = maxTokens)
        return engine.newSession(options).use { session ->
            val text = StringBuilder()
            var steps = 0
            var stats: Stats? = null
            session.stream(userMessage(thread, incoming)).collect { event ->
                when (event) {
                    is TokenEvent.Token -> {
                        text.append(event.text)
                        if (event.ids.isNotEmpty()) steps++
                    }
                    is TokenEvent.Done -> stats = event.stats
                    else -> Unit // no tools in this session
                }
            }
            val s = stats ?: throw TernException.Internal("the answer ended without statistics")
            ReplySuggestion(
                text = cleanReply(text.toString(), me),
                tokens = s.generatedTokens.toInt(),
                timeToFirstTokenMs = s.timeToFirstTokenMs,
                decodeTokensPerS = s.decodeTokensPerS,
                totalMs = s.prefillMs + s.decodeMs,
                tokensPerStep = if (steps > 0) s.generatedTokens.toDouble() / steps else 0.0,
            )
        }
    }

    fun systemPrompt(): String =
        "You write replies for $me. Match $me's usual style: the length, tone and words of $me's earlier messages."

    /** The conversation so far and the incoming message, as the model is asked. */
    fun userMessage(thread: ContactThread, incoming: String): String {
        val lines = (thread.messages.takeLast(historyMessages) + ThreadMessage(false, incoming))
            .joinToString("\n") { m -> "${if (m.fromMe) me else thread.contact.name}: ${m.text}" }
        return "Conversation so far:\n$lines\n\nWrite $me's reply to the last message."
    }
}

/** The reply's first line, without the `Name:` prefix or quotes small models sometimes add. */
fun cleanReply(raw: String, me: String): String {
    var text = raw.lineSequence().map { it.trim() }.firstOrNull { it.isNotEmpty() } ?: ""
    if (text.startsWith("$me:", ignoreCase = true)) text = text.substring(me.length + 1).trim()
    if (text.length >= 2 && text.first() == '"' && text.last() == '"') text = text.substring(1, text.length - 1).trim()
    return text
}
