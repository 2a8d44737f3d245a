// One activity, four tabs: Chat, Auto-reply, UI agent, Models. Each tab's state lives in an
// androidx ViewModel that wraps the matching class of app-logic.

package dev.tern.sample.app

import android.os.Bundle
import androidx.activity.ComponentActivity
import androidx.activity.compose.setContent
import androidx.activity.enableEdgeToEdge
import androidx.compose.foundation.layout.Box
import androidx.compose.foundation.layout.fillMaxSize
import androidx.compose.foundation.layout.padding
import androidx.compose.material.icons.Icons
import androidx.compose.material.icons.automirrored.filled.Chat
import androidx.compose.material.icons.filled.Download
import androidx.compose.material.icons.filled.Quickreply
import androidx.compose.material.icons.filled.TouchApp
import androidx.compose.material3.CircularProgressIndicator
import androidx.compose.material3.Icon
import androidx.compose.material3.MaterialTheme
import androidx.compose.material3.NavigationBar
import androidx.compose.material3.NavigationBarItem
import androidx.compose.material3.Scaffold
import androidx.compose.material3.Text
import androidx.compose.runtime.Composable
import androidx.compose.runtime.getValue
import androidx.compose.runtime.mutableStateOf
import androidx.compose.runtime.saveable.rememberSaveable
import androidx.compose.runtime.setValue
import androidx.compose.ui.Alignment
import androidx.compose.ui.Modifier
import androidx.compose.ui.graphics.vector.ImageVector
import androidx.compose.ui.res.stringResource
import androidx.compose.ui.unit.dp
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import dev.tern.Engine

class MainActivity : ComponentActivity() {
    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        enableEdgeToEdge()
        setContent { MaterialTheme { SampleApp(TernSampleApp.instance) } }
    }
}

private enum class Tab(val label: Int, val icon: ImageVector) {
    CHAT(R.string.tab_chat, Icons.AutoMirrored.Filled.Chat),
    REPLY(R.string.tab_reply, Icons.Filled.Quickreply),
    AGENT(R.string.tab_agent, Icons.Filled.TouchApp),
    MODELS(R.string.tab_models, Icons.Filled.Download),
}

@Composable
private fun SampleApp(app: TernSampleApp) {
    val engineState by app.engine.collectAsStateWithLifecycle()
    var tab by rememberSaveable { mutableStateOf(if (engineState is EngineState.None) Tab.MODELS else Tab.CHAT) }
    Scaffold(
        bottomBar = {
            NavigationBar {
                Tab.entries.forEach { t ->
                    NavigationBarItem(
                        selected = tab == t,
                        onClick = { tab = t },
                        icon = { Icon(t.icon, contentDescription = null) },
                        label = { Text(stringResource(t.label)) },
                    )
                }
            }
        },
    ) { padding ->
        Box(Modifier.padding(padding).fillMaxSize()) {
            when (tab) {
                Tab.MODELS -> ModelPickerScreen(app)
                else -> WithEngine(engineState) { engine ->
                    when (tab) {
                        Tab.CHAT -> ChatScreen(engine)
                        Tab.REPLY -> AutoReplyScreen(engine, app.threads, app.history)
                        Tab.AGENT -> AgentScreen(engine)
                        Tab.MODELS -> Unit
                    }
                }
            }
        }
    }
}

/** Shows [content] once a model is loaded, and what is happening until then. */
@Composable
private fun WithEngine(state: EngineState, content: @Composable (Engine) -> Unit) {
    when (state) {
        is EngineState.Ready -> content(state.engine)
        is EngineState.Loading -> Box(Modifier.fillMaxSize(), contentAlignment = Alignment.Center) { CircularProgressIndicator() }
        is EngineState.Failed -> Centered("Cannot load the model: ${state.message}")
        EngineState.None -> Centered(stringResource(R.string.no_model))
    }
}

@Composable
fun Centered(text: String) {
    Box(Modifier.fillMaxSize().padding(24.dp), contentAlignment = Alignment.Center) {
        Text(text, style = MaterialTheme.typography.bodyLarge)
    }
}
