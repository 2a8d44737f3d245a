// The UI agent's logic: a screen (read by the app's AccessibilityService) and the user's goal in,
// the next action out, constrained so that it names an element of that screen; the user confirms
// it before it is performed, and anything that sends, pays or deletes always asks.

package dev.tern.sample

import dev.tern.Engine
import dev.tern.SamplingOptions
import dev.tern.Screen
import dev.tern.Session
import dev.tern.SessionOptions
import dev.tern.TernException
import dev.tern.UiAction
import dev.tern.UiActionKind
import dev.tern.UiElement
import dev.tern.uiSystemPrompt
import dev.tern.validateUiAction
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Job
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch

/** Reads the screen the user sees now (on Android: the active window, by the AccessibilityService). */
fun interface ScreenReader {
    suspend fun current(): Screen?
}

/** Performs an action on the screen it was chosen for; false when the element is gone. */
fun interface ActionPerformer {
    suspend fun perform(action: UiAction, screen: Screen): Boolean
}

/** What an action would do that the user must always agree to first. */
enum class Risk { NONE, SENDS, PAYS, DELETES }

/** The next action the model proposes, described for the user. */
data class Proposal(
    val goal: String,
    val screen: Screen,
    val action: UiAction,
    /** The element the action names (none for `back`). */
    val element: UiElement?,
    val risk: Risk,
) {
    /** Risky actions always ask; others ask unless the user let the agent run safe steps alone. */
    fun needsConfirmation(autoRunSafe: Boolean): Boolean = risk != Risk.NONE || !autoRunSafe

    /** "Tap “Send”", "Type “hello” into “Message”", ... */
    fun describe(): String {
        val target = element?.let { "“${it.text.ifEmpty { it.className }}”" } ?: ""
        return when (action.action) {
            UiActionKind.TAP -> "Tap $target"
            UiActionKind.TYPE -> "Type “${action.text ?: ""}” into $target"
            UiActionKind.SCROLL -> "Scroll $target"
            UiActionKind.BACK -> "Go back"
        }
    }
}

/**
 * Chooses actions with a session of its own: the UI-action system prompt, each step one turn,
 * constrained by a schema built from that step's screen (ids restricted to its elements).
 */
class UiAgent(private val engine: Engine, private val maxTokens: UInt = 64u) : AutoCloseable {
    private var session: Session = newSession()

    // Greedy: the most likely action, the same one each time for the same screen and goal.
    private fun newSession() =
        engine.newSession(SessionOptions(systemPrompt = uiSystemPrompt(), sampling = SamplingOptions(), maxTokens = maxTokens))

    /** Forgets earlier steps: call it before a goal unrelated to the last one. */
    fun reset() {
        session.close()
        session = newSession()
    }

    /** The next action towards [goal] on [screen]; it names an element that is on the screen. */
    suspend fun propose(screen: Screen, goal: String): Proposal {
        val action = session.nextAction(screen, goal)
        // The constraint already guarantees this; the app checks again before touching anything.
        validateUiAction(screen, action)
        val element = action.id?.let { id -> screen.elements.first { it.id == id } }
        return Proposal(goal, screen, action, element, riskOf(action, element))
    }

    /** Stops a proposal in progress. */
    fun cancel() = session.cancel()

    override fun close() = session.close()
}

private val PAYS = Regex("""\b(pay|buy|purchase|checkout|check out|order|subscribe|donate|transfer|cart)\b""", RegexOption.IGNORE_CASE)
private val SENDS = Regex("""\b(send|post|reply|share|submit|publish|forward|call|tweet)\b""", RegexOption.IGNORE_CASE)
private val DELETES = Regex("""\b(delete|remove|erase|trash|discard|clear|uninstall|unsubscribe|archive)\b""", RegexOption.IGNORE_CASE)

/**
 * What tapping (or submitting) an element would do, judged from its words and class. Errs on
 * the side of asking: a false alarm costs a tap, a missed payment costs money.
 */
fun riskOf(action: UiAction, element: UiElement?): Risk {
    if (element == null || action.action == UiActionKind.SCROLL) return Risk.NONE
    val words = "${element.text} ${element.className}"
    return when {
        action.action == UiActionKind.TYPE -> Risk.NONE // typing changes nothing until it is sent
        PAYS.containsMatchIn(words) -> Risk.PAYS
        DELETES.containsMatchIn(words) -> Risk.DELETES
        SENDS.containsMatchIn(words) -> Risk.SENDS
        else -> Risk.NONE
    }
}

/** Where the agent is in a goal. */
sealed interface AgentState {
    data object Idle : AgentState
    data class Thinking(val goal: String, val step: Int) : AgentState
    /** Waiting for the user to confirm or reject [proposal]. */
    data class Confirm(val proposal: Proposal, val step: Int) : AgentState
    data class Performed(val proposal: Proposal, val step: Int) : AgentState
    data class Finished(val goal: String, val steps: Int, val reason: String) : AgentState
    data class Failed(val goal: String, val message: String) : AgentState
}

/**
 * The agent screen's loop: read the screen, propose, ask, perform, repeat until the user stops,
 * [maxSteps] actions were taken or the screen no longer changes. The app's screen renders
 * [state] and calls [confirm] / [reject].
 */
class UiAgentController(
    private val agent: UiAgent,
    private val reader: ScreenReader,
    private val performer: ActionPerformer,
    private val scope: CoroutineScope,
    private val maxSteps: Int = 5,
    /** Perform actions without risk at once; sending, paying and deleting still ask. */
    var autoRunSafe: Boolean = false,
) {
    private val _state = MutableStateFlow<AgentState>(AgentState.Idle)
    val state: StateFlow<AgentState> = _state.asStateFlow()
    private val _performed = MutableStateFlow<List<Proposal>>(emptyList())
    /** The steps performed for the current goal, oldest first. */
    val performed: StateFlow<List<Proposal>> = _performed.asStateFlow()
    private var job: Job? = null
    private var answer: kotlinx.coroutines.CompletableDeferred<Boolean>? = null

    fun start(goal: String) {
        job?.cancel()
        agent.reset()
        _performed.value = emptyList()
        job = scope.launch { loop(goal) }
    }

    fun confirm() = answer?.complete(true)

    fun reject() = answer?.complete(false)

    fun stop() {
        job?.cancel()
        agent.cancel()
        _state.value = AgentState.Idle
    }

    private suspend fun loop(goal: String) {
        var last: Screen? = null
        for (step in 1..maxSteps) {
            val screen = reader.current() ?: return finish(goal, step - 1, "no screen to read")
            if (screen == last) return finish(goal, step - 1, "the screen did not change")
            _state.value = AgentState.Thinking(goal, step)
            val proposal = try {
                agent.propose(screen, goal)
            } catch (e: CancellationException) {
                throw e
            } catch (e: TernException) {
                _state.value = AgentState.Failed(goal, e.message ?: e.toString())
                return
            }
            if (proposal.needsConfirmation(autoRunSafe)) {
                val reply = kotlinx.coroutines.CompletableDeferred<Boolean>()
                answer = reply
                _state.value = AgentState.Confirm(proposal, step)
                if (!reply.await()) return finish(goal, step - 1, "the user declined")
            }
            if (!performer.perform(proposal.action, screen)) return finish(goal, step - 1, "the element is gone")
            _performed.value = _performed.value + proposal
            _state.value = AgentState.Performed(proposal, step)
            last = screen
        }
        finish(goal, maxSteps, "step limit")
    }

    private fun finish(goal: String, steps: Int, reason: String) {
        _state.value = AgentState.Finished(goal, steps, reason)
    }
}
