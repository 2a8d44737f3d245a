// The UI agent's eyes and hands: reads the active window into the screen form the model reads
// (elements with id, class, text, clickable) and performs the actions the user confirmed. Its
// confirmation bar is an accessibility overlay over the app being driven, so the user sees the
// screen the action is for while deciding.

package dev.tern.sample.app

import android.accessibilityservice.AccessibilityService
import android.graphics.PixelFormat
import android.os.Bundle
import android.view.Gravity
import android.view.WindowManager
import android.view.accessibility.AccessibilityEvent
import android.view.accessibility.AccessibilityNodeInfo
import android.widget.Button
import android.widget.LinearLayout
import android.widget.TextView
import dev.tern.Screen
import dev.tern.UiAction
import dev.tern.UiActionKind
import dev.tern.UiElement
import dev.tern.sample.ActionPerformer
import dev.tern.sample.AgentState
import dev.tern.sample.ScreenReader
import dev.tern.sample.UiAgent
import dev.tern.sample.UiAgentController
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.launch

class AgentAccessibilityService : AccessibilityService(), ScreenReader, ActionPerformer {
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Main)
    /** The nodes of the last screen read, by the ids the model saw. */
    private var nodes: Map<UInt, AccessibilityNodeInfo> = emptyMap()
    private var controller: UiAgentController? = null
    private var overlay: Overlay? = null
    private var watcher: Job? = null

    override fun onServiceConnected() {
        running.value = this
    }

    override fun onUnbind(intent: android.content.Intent?): Boolean {
        running.value = null
        stopAgent()
        scope.cancel()
        return super.onUnbind(intent)
    }

    override fun onAccessibilityEvent(event: AccessibilityEvent) = Unit // the screen is read when a step needs it

    override fun onInterrupt() = stopAgent()

    /** Starts working towards [goal] on the app the user goes to next (the sample leaves the screen). */
    fun startAgent(goal: String, autoRunSafe: Boolean) {
        val engine = (TernSampleApp.instance.engine.value as? EngineState.Ready)?.engine ?: return
        stopAgent()
        val agent = UiAgent(engine)
        val c = UiAgentController(agent, this, this, scope, autoRunSafe = autoRunSafe)
        controller = c
        overlay = Overlay(c).also { it.show() }
        watcher = scope.launch {
            delay(800) // let the sample leave the screen and the target app come back
            c.start(goal)
            c.state.collect { state ->
                lastState.value = state
                overlay?.render(state)
                if (state is AgentState.Finished || state is AgentState.Failed) {
                    delay(2500)
                    stopAgent()
                }
            }
        }
    }

    fun stopAgent() {
        controller?.stop()
        controller = null
        overlay?.hide()
        overlay = null
        watcher?.cancel()
        watcher = null
    }

    // ScreenReader: the active window's visible elements that have words or can be acted on.
    override suspend fun current(): Screen? {
        val root = rootInActiveWindow ?: return null
        if (root.packageName == packageName) return null // never drive the sample itself
        val found = mutableMapOf<UInt, AccessibilityNodeInfo>()
        val elements = mutableListOf<UiElement>()
        fun visit(node: AccessibilityNodeInfo, depth: Int) {
            if (!node.isVisibleToUser || depth > 30 || elements.size >= 60) return
            val words = (node.text ?: node.contentDescription ?: node.hintText)?.toString()?.trim().orEmpty()
            val actionable = node.isClickable || node.isEditable || node.isScrollable
            if (words.isNotEmpty() || actionable) {
                val id = elements.size.toUInt()
                found[id] = node
                elements += UiElement(
                    id = id,
                    className = node.className?.toString()?.substringAfterLast('.') ?: "View",
                    text = words.take(80),
                    clickable = node.isClickable || clickableAncestor(node) != null,
                )
            }
            for (i in 0 until node.childCount) node.getChild(i)?.let { visit(it, depth + 1) }
        }
        visit(root, 0)
        nodes = found
        val app = root.packageName?.toString()?.let { pkg ->
            runCatching { packageManager.getApplicationLabel(packageManager.getApplicationInfo(pkg, 0)).toString() }.getOrDefault(pkg)
        } ?: "App"
        return Screen(app = app, elements = elements)
    }

    // ActionPerformer: what the user confirmed, on the node the model named.
    override suspend fun perform(action: UiAction, screen: Screen): Boolean {
        if (action.action == UiActionKind.BACK) return performGlobalAction(GLOBAL_ACTION_BACK)
        val node = action.id?.let { nodes[it] } ?: return false
        if (!node.refresh()) return false // the element left the screen
        return when (action.action) {
            UiActionKind.TAP -> (if (node.isClickable) node else clickableAncestor(node))?.performAction(AccessibilityNodeInfo.ACTION_CLICK) ?: false
            UiActionKind.TYPE -> node.performAction(
                AccessibilityNodeInfo.ACTION_SET_TEXT,
                Bundle().apply { putCharSequence(AccessibilityNodeInfo.ACTION_ARGUMENT_SET_TEXT_CHARSEQUENCE, action.text ?: "") },
            )
            UiActionKind.SCROLL -> generateSequence(node) { it.parent }.firstOrNull { it.isScrollable }
                ?.performAction(AccessibilityNodeInfo.ACTION_SCROLL_FORWARD) ?: false
            UiActionKind.BACK -> false
        }
    }

    private fun clickableAncestor(node: AccessibilityNodeInfo): AccessibilityNodeInfo? =
        generateSequence(node.parent) { it.parent }.take(4).firstOrNull { it.isClickable }

    /** The bar at the bottom of the driven app: the proposal, and Do it / Not this. */
    private inner class Overlay(private val c: UiAgentController) {
        private val windows = getSystemService(WindowManager::class.java)
        private val message = TextView(this@AgentAccessibilityService).apply { setPadding(24, 16, 24, 8); textSize = 16f }
        private val yes = Button(this@AgentAccessibilityService).apply { text = getString(R.string.confirm); setOnClickListener { c.confirm() } }
        private val no = Button(this@AgentAccessibilityService).apply { text = getString(R.string.reject); setOnClickListener { c.reject() } }
        private val view = LinearLayout(this@AgentAccessibilityService).apply {
            orientation = LinearLayout.VERTICAL
            setBackgroundColor(0xF0202830.toInt())
            message.setTextColor(0xFFFFFFFF.toInt())
            addView(message)
            addView(LinearLayout(context).apply { addView(yes); addView(no) })
        }

        fun show() {
            val params = WindowManager.LayoutParams(
                WindowManager.LayoutParams.MATCH_PARENT,
                WindowManager.LayoutParams.WRAP_CONTENT,
                WindowManager.LayoutParams.TYPE_ACCESSIBILITY_OVERLAY,
                WindowManager.LayoutParams.FLAG_NOT_FOCUSABLE,
                PixelFormat.TRANSLUCENT,
            ).apply { gravity = Gravity.BOTTOM }
            windows.addView(view, params)
        }

        fun hide() = runCatching { windows.removeView(view) }

        fun render(state: AgentState) {
            val asking = state is AgentState.Confirm
            yes.isEnabled = asking
            no.isEnabled = asking
            message.text = when (state) {
                AgentState.Idle -> "Agent ready"
                is AgentState.Thinking -> "Step ${state.step}: reading the screen…"
                is AgentState.Confirm -> "Step ${state.step}: ${state.proposal.describe()}" +
                    if (state.proposal.risk != dev.tern.sample.Risk.NONE) " (${state.proposal.risk.name.lowercase()}: please check)" else ""
                is AgentState.Performed -> "Step ${state.step}: done — ${state.proposal.describe()}"
                is AgentState.Finished -> "Finished after ${state.steps} steps: ${state.reason}"
                is AgentState.Failed -> "Stopped: ${state.message}"
            }
        }
    }

    companion object {
        /** The connected service, once the user turned it on in Accessibility settings. */
        val running = MutableStateFlow<AgentAccessibilityService?>(null)
        /** The agent's latest state, for the sample's Agent tab. */
        val lastState: MutableStateFlow<AgentState> = MutableStateFlow(AgentState.Idle)
        val state: StateFlow<AgentState> get() = lastState
    }
}

