// The Chat tab: the conversation streaming in, a Stop button while it does, Regenerate and New
// chat, and under each answer its time to first token, tokens/s and energy per token.

package dev.tern.sample.app

import androidx.compose.foundation.background
import androidx.compose.foundation.layout.Arrangement
import androidx.compose.foundation.layout.Box
import androidx.compose.foundation.layout.Spacer
import androidx.compose.foundation.layout.Column
import androidx.compose.foundation.layout.Row
import androidx.compose.foundation.layout.fillMaxSize
import androidx.compose.foundation.layout.fillMaxWidth
import androidx.compose.foundation.layout.padding
import androidx.compose.foundation.layout.widthIn
import androidx.compose.foundation.lazy.LazyColumn
import androidx.compose.foundation.lazy.items
import androidx.compose.foundation.lazy.rememberLazyListState
import androidx.compose.foundation.shape.RoundedCornerShape
import androidx.compose.material3.Button
import androidx.compose.material3.DropdownMenu
import androidx.compose.material3.DropdownMenuItem
import androidx.compose.material3.MaterialTheme
import androidx.compose.material3.OutlinedButton
import androidx.compose.material3.OutlinedTextField
import androidx.compose.material3.Text
import androidx.compose.material3.TextButton
import androidx.compose.runtime.Composable
import androidx.compose.runtime.LaunchedEffect
import androidx.compose.runtime.getValue
import androidx.compose.runtime.mutableStateOf
import androidx.compose.runtime.remember
import androidx.compose.runtime.saveable.rememberSaveable
import androidx.compose.runtime.setValue
import androidx.compose.ui.Alignment
import androidx.compose.ui.Modifier
import androidx.compose.ui.res.stringResource
import androidx.compose.ui.unit.dp
import androidx.lifecycle.ViewModel
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import androidx.lifecycle.viewModelScope
import androidx.lifecycle.viewmodel.compose.viewModel
import dev.tern.EnergyMode
import dev.tern.Engine
import dev.tern.sample.ENERGY_MODES
import dev.tern.sample.AnswerMetrics
import dev.tern.sample.ChatMessage
import dev.tern.sample.ChatSettings
import dev.tern.sample.ChatViewModel
import dev.tern.sample.Role

// snippet:begin screen-model
/** Keeps the chat across configuration changes; the generation runs in viewModelScope. */
class ChatScreenModel(engine: Engine) : ViewModel() {
    val chat = ChatViewModel(engine, viewModelScope, ChatSettings(systemPrompt = "You are a helpful assistant. Answer briefly."))

    override fun onCleared() = chat.close() // cancels an answer in progress, in Rust too
}
// snippet:end

// snippet:begin screen
@Composable
fun ChatScreen(engine: Engine) {
    val model: ChatScreenModel = viewModel(key = "chat-${System.identityHashCode(engine)}") { ChatScreenModel(engine) }
    val state by model.chat.state.collectAsStateWithLifecycle()
    var input by rememberSaveable { mutableStateOf("") }
    val list = rememberLazyListState()
    LaunchedEffect(state.messages.size, state.messages.lastOrNull()?.text?.length) {
        if (state.messages.isNotEmpty()) list.animateScrollToItem(state.messages.lastIndex)
    }

    Column(Modifier.fillMaxSize()) {
        Row(Modifier.fillMaxWidth().padding(8.dp), horizontalArrangement = Arrangement.End, verticalAlignment = Alignment.CenterVertically) {
            EnergyModeMenu(state.energyMode) { model.chat.setEnergyMode(it) }
            Spacer(Modifier.weight(1f))
            TextButton(onClick = { model.chat.regenerate() }, enabled = !state.generating && state.messages.isNotEmpty()) {
                Text(stringResource(R.string.regenerate))
            }
            TextButton(onClick = { model.chat.newChat() }) { Text(stringResource(R.string.new_chat)) }
        }
        LazyColumn(Modifier.weight(1f).padding(horizontal = 12.dp), state = list, verticalArrangement = Arrangement.spacedBy(8.dp)) {
            items(state.messages, key = { it.id }) { Bubble(it) }
        }
        state.error?.let { Text(it, color = MaterialTheme.colorScheme.error, modifier = Modifier.padding(12.dp)) }
        Row(Modifier.fillMaxWidth().padding(8.dp), verticalAlignment = Alignment.CenterVertically) {
            OutlinedTextField(
                value = input,
                onValueChange = { input = it },
                modifier = Modifier.weight(1f),
                placeholder = { Text(stringResource(R.string.chat_hint)) },
            )
            if (state.generating) {
                OutlinedButton(onClick = { model.chat.stop() }, Modifier.padding(start = 8.dp)) { Text(stringResource(R.string.stop)) }
            } else {
                Button(onClick = { if (model.chat.send(input)) input = "" }, Modifier.padding(start = 8.dp)) {
                    Text(stringResource(R.string.send))
                }
            }
        }
    }
}
// snippet:end

@Composable
private fun Bubble(message: ChatMessage) {
    val mine = message.role == Role.USER
    Column(Modifier.fillMaxWidth(), horizontalAlignment = if (mine) Alignment.End else Alignment.Start) {
        val color = if (mine) MaterialTheme.colorScheme.primaryContainer else MaterialTheme.colorScheme.surfaceVariant
        Text(
            text = message.text.ifEmpty { if (message.streaming) "…" else "" },
            modifier = Modifier.widthIn(max = 320.dp).background(color, RoundedCornerShape(12.dp)).padding(12.dp),
        )
        message.metrics?.let { Text(figures(it, message), style = MaterialTheme.typography.labelSmall, modifier = Modifier.padding(4.dp)) }
    }
}

/** "TTFT 180 ms · 38.2 tok/s · 64 tokens · 2.1 mJ/token (estimated)" */
private fun figures(m: AnswerMetrics, message: ChatMessage): String = buildList {
    m.timeToFirstTokenMs?.let { add("TTFT %.0f ms".format(it)) }
    m.tokensPerSecond?.let { add("%.1f tok/s".format(it)) }
    add("${m.tokens} tokens")
    m.energy?.let { add("%.1f mJ/token (%s)".format(it.millijoulesPerToken, if (it.measured) "measured" else "estimated")) }
    if (message.stopped) add("stopped")
}.joinToString(" · ")

/** The energy mode in force, and a menu to change it. */
@Composable
private fun EnergyModeMenu(current: String?, onPick: (EnergyMode) -> Unit) {
    var open by remember { mutableStateOf(false) }
    Box {
        TextButton(onClick = { open = true }) { Text("Energy: ${current ?: "–"}") }
        DropdownMenu(expanded = open, onDismissRequest = { open = false }) {
            ENERGY_MODES.forEach { (name, mode) ->
                DropdownMenuItem(text = { Text(name) }, onClick = { onPick(mode); open = false })
            }
        }
    }
}
