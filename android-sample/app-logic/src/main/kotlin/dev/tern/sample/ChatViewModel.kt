// The Chat screen's logic: one conversation with the model, streamed into a StateFlow that the
// Compose screen renders. No Android types: the app wraps it in an androidx ViewModel and passes
// viewModelScope; the tests drive it on a JVM with the real model.

package dev.tern.sample

import dev.tern.ConversationMessage
import dev.tern.EnergyMode
import dev.tern.Engine
import dev.tern.MessageRole
import dev.tern.SamplingOptions
import dev.tern.Session
import dev.tern.SessionOptions
import dev.tern.Stats
import dev.tern.TernException
import dev.tern.TokenEvent
import dev.tern.stream
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Job
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch
import kotlin.time.TimeSource

/** How the chat talks: the session's options, in the terms the settings screen shows. */
data class ChatSettings(
    val systemPrompt: String? = null,
    /** Most tokens per answer; a phone screen rarely needs more. */
    val maxTokens: UInt = 256u,
    /** 0 is greedy (the same answer every time); around 0.7 gives varied answers. */
    val temperature: Float = 0.7f,
    /** Fixed seed for reproducible sampling; none draws a fresh one per conversation. */
    val seed: ULong? = null,
) {
    fun sessionOptions(): SessionOptions =
        SessionOptions(
            systemPrompt = systemPrompt,
            maxTokens = maxTokens,
            sampling = SamplingOptions(temperature = temperature, seed = seed),
        )
}

enum class Role { USER, ASSISTANT }

data class ChatMessage(
    val id: Long,
    val role: Role,
    val text: String,
    /** The answer is still arriving. */
    val streaming: Boolean = false,
    /** The user stopped it before it was complete. */
    val stopped: Boolean = false,
    /** Figures of an answer (live while streaming, the engine's own once finished). */
    val metrics: AnswerMetrics? = null,
)

/**
 * What the chat shows under an answer. While it streams, tokens/s is measured from the token
 * events as they arrive; when it is done, the engine's statistics replace the live figures.
 */
data class AnswerMetrics(
    val tokens: Int,
    /** Tokens of the conversation reused from the KV cache (a follow-up prefills only what is new). */
    val cachedTokens: Int? = null,
    val timeToFirstTokenMs: Double?,
    val tokensPerSecond: Double?,
    /** Why the answer ended (`MAX_TOKENS`, `CANCELLED`, ...); none while streaming. */
    val finishReason: String? = null,
    val energy: EnergyFigures? = null,
) {
    companion object {
        fun of(stats: Stats): AnswerMetrics =
            AnswerMetrics(
                tokens = stats.generatedTokens.toInt(),
                cachedTokens = stats.cachedTokens.toInt(),
                timeToFirstTokenMs = stats.timeToFirstTokenMs,
                tokensPerSecond = stats.decodeTokensPerS.takeIf { stats.generatedTokens > 1u },
                finishReason = stats.finishReason.name,
                energy = EnergyFigures.of(stats),
            )
    }
}

data class ChatState(
    val messages: List<ChatMessage> = emptyList(),
    val generating: Boolean = false,
    /** The energy mode in force (power saver while the phone is hot or low on battery). */
    val energyMode: String? = null,
    /** The last failure, in words for the user (typed errors carry no prompt text). */
    val error: String? = null,
)

/**
 * One conversation: [send] streams an answer into [state], [stop] ends it where it is,
 * [regenerate] answers the last question again, [newChat] starts over. Multi-turn: every answer
 * stays in the session, so a follow-up reuses the KV cache of what came before.
 */
class ChatViewModel(
    private val engine: Engine,
    private val scope: CoroutineScope,
    private var settings: ChatSettings = ChatSettings(),
) : AutoCloseable {
    private val _state = MutableStateFlow(ChatState(energyMode = energyModeName(engine.energyStatus().effectiveMode)))
    val state: StateFlow<ChatState> = _state.asStateFlow()

    private var session: Session = engine.newSession(settings.sessionOptions())
    private var job: Job? = null
    private var nextId = 0L

    /** Whether the engine is still generating for this chat (briefly true after a stop). */
    val answering: Boolean get() = session.isBusy()

    /** Starts answering [text]; false (and nothing happens) while an answer is in progress. */
    fun send(text: String): Boolean {
        if (text.isBlank() || _state.value.generating) return false
        val question = ChatMessage(nextId++, Role.USER, text.trim())
        _state.update { it.copy(messages = it.messages + question, error = null) }
        answer(question.text)
        return true
    }

    /** Stops the answer in progress; what came so far stays, marked as stopped. */
    fun stop() {
        session.cancel()
    }

    /**
     * Answers the last question again, in the same session: its conversation is set back to
     * before that question, which is then asked again. Everything before it stays in the KV
     * cache, so only the question's last token is computed again before the new answer. With a
     * temperature above 0 the session's sampler goes on with its random stream, so the new
     * answer differs (a fixed seed makes the sequence of answers reproducible); greedy decoding
     * (temperature 0) gives the same answer again.
     */
    fun regenerate(): Boolean {
        val messages = _state.value.messages
        if (_state.value.generating) return false
        val lastQuestion = messages.indexOfLast { it.role == Role.USER }
        if (lastQuestion < 0) return false
        _state.update { it.copy(messages = messages.take(lastQuestion + 1), error = null) }
        answer(messages[lastQuestion].text, again = true)
        return true
    }

    /**
     * Sets the engine's energy mode (it applies from the next answer, to every session of the
     * engine): performance, balanced (the default) or power saver. A mode the device cannot
     * run (a custom selection of cores it lacks) leaves the mode as it was and says why in `error`.
     */
    fun setEnergyMode(mode: EnergyMode) {
        try {
            engine.setEnergyMode(mode)
        } catch (e: TernException) {
            _state.update { it.copy(error = describe(e)) }
        }
        _state.update { it.copy(energyMode = energyModeName(engine.energyStatus().effectiveMode)) }
    }

    /** Forgets the conversation (and applies changed settings). */
    fun newChat(newSettings: ChatSettings = settings) {
        job?.cancel()
        settings = newSettings
        replaceSession(newSettings)
        _state.value = ChatState(energyMode = _state.value.energyMode)
    }

    override fun close() {
        job?.cancel()
        session.close()
    }

    private fun replaceSession(newSettings: ChatSettings) {
        val old = session
        session = engine.newSession(newSettings.sessionOptions())
        old.close()
    }

    /**
     * Streams the answer to [question]. [again]: it is the conversation's last question, and the
     * session's conversation is first set back to before it.
     */
    private fun answer(question: String, again: Boolean = false) {
        val id = nextId++
        val target = session
        _state.update { it.copy(messages = it.messages + ChatMessage(id, Role.ASSISTANT, "", streaming = true), generating = true) }
        job = scope.launch {
            try {
                awaitIdle(target)
                if (again) target.setMessages(conversationBefore(target.messages(), question))
                streamInto(id, target, question)
                _state.update { it.copy(energyMode = energyModeName(engine.energyStatus().effectiveMode)) }
            } catch (e: CancellationException) {
                finish(id) { it.copy(stopped = true) }
                throw e
            } catch (e: TernException) {
                finish(id) { it }
                _state.update { it.copy(error = describe(e)) }
            }
        }
    }

    // snippet:begin stream
    private suspend fun streamInto(id: Long, target: Session, question: String) {
        val sent = TimeSource.Monotonic.markNow()
        var firstToken: TimeSource.Monotonic.ValueTimeMark? = null
        var tokens = 0
        val text = StringBuilder()
        target.stream(question).collect { event ->
            when (event) {
                is TokenEvent.Token -> {
                    val now = TimeSource.Monotonic.markNow()
                    if (firstToken == null) firstToken = now
                    tokens += event.ids.size
                    text.append(event.text)
                    val first = firstToken!!
                    val decodeSeconds = (now - first).inWholeMicroseconds / 1e6
                    val live = AnswerMetrics(
                        tokens = tokens,
                        timeToFirstTokenMs = (first - sent).inWholeMicroseconds / 1e3,
                        tokensPerSecond = if (decodeSeconds > 0) (tokens - 1) / decodeSeconds else null,
                    )
                    edit(id) { it.copy(text = text.toString(), metrics = live) }
                }
                is TokenEvent.Done -> {
                    val metrics = AnswerMetrics.of(event.stats)
                    val stopped = metrics.finishReason == "CANCELLED"
                    finish(id) { it.copy(text = text.toString(), metrics = metrics, stopped = stopped) }
                }
                else -> Unit // events of tool calls: this chat gives the model no tools
            }
        }
    }
    // snippet:end

    /** A session is busy for a moment after a stopped answer's thread ends. */
    private suspend fun awaitIdle(target: Session) {
        while (target.isBusy()) delay(5)
    }

    private fun edit(id: Long, change: (ChatMessage) -> ChatMessage) {
        _state.update { s -> s.copy(messages = s.messages.map { if (it.id == id) change(it) else it }) }
    }

    private fun finish(id: Long, change: (ChatMessage) -> ChatMessage) {
        _state.update { s ->
            s.copy(messages = s.messages.map { if (it.id == id) change(it).copy(streaming = false) else it }, generating = false)
        }
    }
}

/**
 * The conversation up to [question], its last question (the question and all after it are
 * dropped); all of it when the question never joined it (sending it failed).
 */
internal fun conversationBefore(conversation: List<ConversationMessage>, question: String): List<ConversationMessage> {
    val last = conversation.indexOfLast { it.role == MessageRole.USER }
    return if (last >= 0 && conversation[last].content == question) conversation.take(last) else conversation
}

/** A typed error in words for the user. */
fun describe(e: TernException): String =
    when (e) {
        is TernException.ContextOverflow -> "The conversation is too long for the model (${e.needed} of ${e.limit} tokens). Start a new chat."
        is TernException.ModelNotFound -> "The model file is missing. Download it again from the model picker."
        is TernException.InvalidModel -> "The model file is damaged. Delete it and download it again."
        is TernException.Busy -> "Still answering. Wait for the answer or stop it."
        else -> "Something went wrong: ${e.message}"
    }
