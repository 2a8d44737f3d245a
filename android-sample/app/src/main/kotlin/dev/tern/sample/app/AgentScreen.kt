// The UI agent tab: the goal, the safety switch, and where the agent is. The agent itself runs
// in AgentAccessibilityService over the app the user switches to; its confirmation bar sits at
// the bottom of that app's screen.

package dev.tern.sample.app

import android.app.Activity
import android.content.Intent
import android.provider.Settings
import androidx.compose.foundation.layout.Arrangement
import androidx.compose.foundation.layout.Column
import androidx.compose.foundation.layout.Row
import androidx.compose.foundation.layout.fillMaxSize
import androidx.compose.foundation.layout.fillMaxWidth
import androidx.compose.foundation.layout.padding
import androidx.compose.material3.Button
import androidx.compose.material3.MaterialTheme
import androidx.compose.material3.OutlinedTextField
import androidx.compose.material3.Switch
import androidx.compose.material3.Text
import androidx.compose.material3.TextButton
import androidx.compose.runtime.Composable
import androidx.compose.runtime.getValue
import androidx.compose.runtime.mutableStateOf
import androidx.compose.runtime.saveable.rememberSaveable
import androidx.compose.runtime.setValue
import androidx.compose.ui.Alignment
import androidx.compose.ui.Modifier
import androidx.compose.ui.platform.LocalContext
import androidx.compose.ui.res.stringResource
import androidx.compose.ui.unit.dp
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import dev.tern.Engine
import dev.tern.sample.AgentState

@Composable
fun AgentScreen(@Suppress("UNUSED_PARAMETER") engine: Engine) {
    val context = LocalContext.current
    val service by AgentAccessibilityService.running.collectAsStateWithLifecycle()
    val state by AgentAccessibilityService.state.collectAsStateWithLifecycle()
    var goal by rememberSaveable { mutableStateOf("") }
    var autoRunSafe by rememberSaveable { mutableStateOf(false) }

    Column(Modifier.fillMaxSize().padding(16.dp), verticalArrangement = Arrangement.spacedBy(12.dp)) {
        Text(
            "Say what to do, then switch to the app to do it in. The agent reads that screen, proposes one step at a " +
                "time and waits for you at the bottom of the screen. Sending, paying and deleting always ask.",
            style = MaterialTheme.typography.bodyMedium,
        )
        if (service == null) {
            TextButton(onClick = { context.startActivity(Intent(Settings.ACTION_ACCESSIBILITY_SETTINGS)) }) {
                Text(stringResource(R.string.grant_accessibility))
            }
        }
        OutlinedTextField(goal, { goal = it }, Modifier.fillMaxWidth(), placeholder = { Text(stringResource(R.string.goal_hint)) })
        Row(verticalAlignment = Alignment.CenterVertically) {
            Switch(autoRunSafe, { autoRunSafe = it })
            Text("Take safe steps without asking", Modifier.padding(start = 8.dp))
        }
        Button(
            enabled = service != null && goal.isNotBlank(),
            onClick = {
                service?.startAgent(goal.trim(), autoRunSafe)
                (context as? Activity)?.moveTaskToBack(true) // back to the app the user came from
            },
        ) { Text(stringResource(R.string.start_agent)) }
        Text(describe(state), style = MaterialTheme.typography.bodyLarge)
    }
}

private fun describe(state: AgentState): String = when (state) {
    AgentState.Idle -> "Not running."
    is AgentState.Thinking -> "Step ${state.step}: reading the screen for “${state.goal}”…"
    is AgentState.Confirm -> "Step ${state.step}: waiting for you — ${state.proposal.describe()}"
    is AgentState.Performed -> "Step ${state.step} done: ${state.proposal.describe()}"
    is AgentState.Finished -> "Finished “${state.goal}” after ${state.steps} steps (${state.reason})."
    is AgentState.Failed -> "Stopped: ${state.message}"
}
