// Observable state for UI: an engine that is loading, ready or failed, and whether a session is
// answering, as StateFlows.

package dev.tern

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch

/** Where loading an engine stands. */
sealed interface EngineState {
    data object Loading : EngineState

    data class Ready(val engine: Engine) : EngineState

    data class Failed(val error: TernException) : EngineState
}

/**
 * Loads the model at [path] in this scope (a `viewModelScope`, say) and reports how it goes:
 * [EngineState.Loading], then [EngineState.Ready] or [EngineState.Failed]. Cancelling the scope
 * while loading abandons the load.
 */
fun CoroutineScope.loadEngine(path: String, options: EngineOptions = EngineOptions()): StateFlow<EngineState> {
    val state = MutableStateFlow<EngineState>(EngineState.Loading)
    launch {
        state.value = try {
            EngineState.Ready(Engine.load(path, options))
        } catch (e: TernException) {
            EngineState.Failed(e)
        }
    }
    return state.asStateFlow()
}

/**
 * Whether this session is busy (answering, or a step such as `prewarm`), as a StateFlow: true
 * from `send` until the answer's last event, false when ready for the next message. It takes
 * the session's one observer (`setObserver`): call it once per session and share the flow.
 */
fun Session.responding(): StateFlow<Boolean> {
    val state = MutableStateFlow(isBusy())
    setObserver(
        object : SessionObserver {
            override fun busyChanged(busy: Boolean) {
                state.value = busy
            }
        },
    )
    return state.asStateFlow()
}
