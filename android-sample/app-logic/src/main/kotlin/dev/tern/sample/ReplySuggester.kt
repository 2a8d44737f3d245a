// The Auto-reply screen's logic: for a message that just came in from a contact, suggest the
// user's reply in their own style, from that contact's earlier messages, and the speed-up
// speculative decoding gave it.

package dev.tern.sample

import dev.tern.Engine
import dev.tern.HistoryScope
import dev.tern.HistoryStore
import dev.tern.SamplingOptions
import dev.tern.SessionOptions
import dev.tern.Speculation
import dev.tern.SpeculationOptions
import dev.tern.SpeculationStats
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
    /** The reply as shown: the answer's first line, cleaned (see [cleanReply]). */
    val text: String,
    /** The model's whole answer, as generated. */
    val answer: String,
    val tokens: Int,
    val timeToFirstTokenMs: Double,
    val decodeTokensPerS: Double,
    val totalMs: Double,
    /**
     * What speculative decoding did: verification steps, drafted and accepted tokens, tokens per
     * decode pass (above 1 means drafted tokens were accepted; 1 is plain decoding).
     */
    val speculation: SpeculationStats,
) {
    val tokensPerStep: Double get() = speculation.tokensPerStep
}

/**
 * The same suggestion decoded plainly and with speculation: the speed-up speculation gave on this
 * device, this thread, now. Greedy decoding makes both answers the same, so [identical] is a check.
 */
data class SpeculationComparison(val plain: ReplySuggestion, val speculative: ReplySuggestion) {
    /** Decode tokens/s with speculation over decode tokens/s without. */
    val speedUp: Double get() = if (plain.decodeTokensPerS > 0) speculative.decodeTokensPerS / plain.decodeTokensPerS else 0.0
    val identical: Boolean get() = plain.answer == speculative.answer
}

/**
 * Suggests replies in the user's style. The prompt holds the contact's latest messages (the
 * user's own earlier messages show the style) and ends with the incoming message, in the form of
 * the `reply` workloads; each suggestion is a fresh session, so threads never mix.
 *
 * Speculative decoding drafts the reply from the prompt and, given a [history] store, from
 * everything kept under the contact's key: older messages than the prompt holds and the replies
 * the user sent (see [remember]), which is where the user's recurring phrases are.
 */
class ReplySuggester(
    private val engine: Engine,
    /** The user's name, as the contact's messages address them. */
    private val me: String,
    private val maxTokens: UInt = 48u,
    /** How many of the thread's latest messages go into the prompt. */
    private val historyMessages: Int = 12,
    /** Each contact's past messages, keyed by [Contact.key], for the drafter; none: the prompt only. */
    val history: HistoryStore? = null,
    /** How suggestions decode; [compare] also runs [Speculation.Off]. */
    private val speculation: Speculation = Speculation.Auto,
) {
    /** Suggests the user's reply to [incoming], the contact's newest message (not yet in [thread]). */
    suspend fun suggest(thread: ContactThread, incoming: String): ReplySuggestion = suggest(thread, incoming, speculation)

    /** Suggests the reply twice, without speculation then with it, and measures the speed-up. */
    suspend fun compare(thread: ContactThread, incoming: String): SpeculationComparison {
        val plain = suggest(thread, incoming, Speculation.Off)
        return SpeculationComparison(plain, suggest(thread, incoming, speculation))
    }

    private suspend fun suggest(thread: ContactThread, incoming: String, mode: Speculation): ReplySuggestion {
        // A suggestion is not sent yet: only what the user sends joins the history (remember).
        val scope = history?.let { HistoryScope(it, thread.contact.key, recordAnswers = false) }
        // Greedy (`SamplingOptions()`): the suggestion is the model's most likely reply, so the
        // comparison with speculation shows the same text at two speeds.
        val options = SessionOptions(
            systemPrompt = systemPrompt(),
            sampling = SamplingOptions(),
            maxTokens = maxTokens,
            speculation = SpeculationOptions(mode = mode, history = scope),
        )
        return engine.newSession(options).use { session ->
            val text = StringBuilder()
            var stats: Stats? = null
            session.stream(userMessage(thread, incoming)).collect { event ->
                when (event) {
                    is TokenEvent.Token -> text.append(event.text)
                    is TokenEvent.Done -> stats = event.stats
                    else -> Unit // no tools in this session
                }
            }
            val s = stats ?: throw TernException.Internal("the answer ended without statistics")
            ReplySuggestion(
                text = cleanReply(text.toString(), me),
                answer = text.toString(),
                tokens = s.generatedTokens.toInt(),
                timeToFirstTokenMs = s.timeToFirstTokenMs,
                decodeTokensPerS = s.decodeTokensPerS,
                totalMs = s.prefillMs + s.decodeMs,
                speculation = s.speculation,
            )
        }
    }

    /** Keeps [message] (received, or the reply the user sent) in [contact]'s history for later drafts. */
    fun remember(contact: Contact, message: ThreadMessage) {
        history?.add(contact.key, message.text)
    }

    /** Fills [thread]'s contact history from the thread when it holds nothing yet (first start, demo threads). */
    fun seedHistory(thread: ContactThread) {
        val store = history ?: return
        if (store.texts(thread.contact.key).isEmpty()) thread.messages.forEach { store.add(thread.contact.key, it.text) }
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
