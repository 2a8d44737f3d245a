// The Auto-reply tab: messages waiting for a reply (from other apps' notifications, or typed in
// as a demo), a suggested reply in the user's style for each, what producing it took, and the
// speed-up speculative decoding from the contact's history gave (measured against plain decoding).

package dev.tern.sample.app

import android.content.ComponentName
import android.content.Intent
import android.os.Build
import android.provider.Settings
import androidx.compose.foundation.layout.Arrangement
import androidx.compose.foundation.layout.Column
import androidx.compose.foundation.layout.Row
import androidx.compose.foundation.layout.fillMaxSize
import androidx.compose.foundation.layout.fillMaxWidth
import androidx.compose.foundation.layout.padding
import androidx.compose.foundation.lazy.LazyColumn
import androidx.compose.foundation.lazy.items
import androidx.compose.material3.Button
import androidx.compose.material3.Card
import androidx.compose.material3.LinearProgressIndicator
import androidx.compose.material3.MaterialTheme
import androidx.compose.material3.OutlinedTextField
import androidx.compose.material3.Text
import androidx.compose.material3.TextButton
import androidx.compose.runtime.Composable
import androidx.compose.runtime.getValue
import androidx.compose.runtime.mutableStateOf
import androidx.compose.runtime.remember
import androidx.compose.runtime.setValue
import androidx.compose.ui.Modifier
import androidx.compose.ui.platform.LocalContext
import androidx.compose.ui.res.stringResource
import androidx.compose.ui.unit.dp
import androidx.core.app.NotificationManagerCompat
import androidx.lifecycle.ViewModel
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import androidx.lifecycle.viewModelScope
import androidx.lifecycle.viewmodel.compose.viewModel
import dev.tern.Engine
import dev.tern.HistoryStore
import dev.tern.TernException
import dev.tern.sample.ContactThread
import dev.tern.sample.Incoming
import dev.tern.sample.ReplySuggester
import dev.tern.sample.ReplySuggestion
import dev.tern.sample.SpeculationComparison
import dev.tern.sample.ThreadMessage
import dev.tern.sample.ThreadBook
import dev.tern.sample.describe
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch

/** The user's name as contacts address them; a real app reads it from the profile. */
private const val ME = "Sam"

class AutoReplyModel(engine: Engine, val book: ThreadBook, history: HistoryStore) : ViewModel() {
    private val suggester = ReplySuggester(engine, ME, history = history)
    /** Suggestions by incoming message; a missing key is being computed or not asked yet. */
    val suggestions = MutableStateFlow<Map<Incoming, Result<ReplySuggestion>>>(emptyMap())
    /** The message a suggestion is being computed for. */
    val working = MutableStateFlow<Incoming?>(null)
    /** Speed-ups measured with "Compare", by incoming message. */
    val comparisons = MutableStateFlow<Map<Incoming, Result<SpeculationComparison>>>(emptyMap())
    private var job: Job? = null

    init {
        // The demo threads (and threads from before the store existed) become drafting context.
        viewModelScope.launch(Dispatchers.IO) {
            try {
                book.threads.value.values.forEach(suggester::seedHistory)
            } catch (e: TernException) {
                android.util.Log.w("TernSample", "reply history: ${describe(e)}")
            }
        }
    }

    fun suggest(incoming: Incoming) {
        suggestions.update { it - incoming }
        work(incoming, { thread, text -> suggester.suggest(thread, text) }) { result ->
            suggestions.update { it + (incoming to result) }
        }
    }

    /**
     * Suggests the reply for [incoming] without speculation and then with it, and keeps the
     * measured speed-up (the second answer also becomes the suggestion: they are the same).
     */
    fun compare(incoming: Incoming) {
        comparisons.update { it - incoming }
        work(incoming, { thread, text -> suggester.compare(thread, text) }) { result ->
            comparisons.update { it + (incoming to result) }
            result.getOrNull()?.let { c -> suggestions.update { it + (incoming to Result.success(c.speculative)) } }
        }
    }

    /** Runs [answer] for [incoming], one at a time (the phone's cores are shared), then [done]. */
    private fun <T> work(incoming: Incoming, answer: suspend (ContactThread, String) -> T, done: (Result<T>) -> Unit) {
        job?.cancel()
        working.value = incoming
        job = viewModelScope.launch {
            val result = try {
                Result.success(answer(book.thread(incoming.contact), incoming.text))
            } catch (e: TernException) {
                Result.failure(IllegalStateException(describe(e)))
            }
            done(result)
            working.value = null
        }
    }

    /** Sends [reply] (through the notification's reply action when it came from one). */
    fun send(incoming: Incoming, reply: String) {
        ReplyNotificationListener.reply(incoming, reply)
        book.replied(incoming, reply)
        suggestions.update { it - incoming }
        comparisons.update { it - incoming }
        // What was said joins the contact's history, so later replies draft from it.
        viewModelScope.launch(Dispatchers.IO) {
            try {
                suggester.remember(incoming.contact, ThreadMessage(false, incoming.text))
                suggester.remember(incoming.contact, ThreadMessage(true, reply))
            } catch (e: TernException) {
                android.util.Log.w("TernSample", "reply history: ${describe(e)}")
            }
        }
    }
}

@Composable
fun AutoReplyScreen(engine: Engine, book: ThreadBook, history: HistoryStore) {
    val model: AutoReplyModel = viewModel(key = "reply-${System.identityHashCode(engine)}") { AutoReplyModel(engine, book, history) }
    val pending by book.pending.collectAsStateWithLifecycle()
    val suggestions by model.suggestions.collectAsStateWithLifecycle()
    val working by model.working.collectAsStateWithLifecycle()
    val comparisons by model.comparisons.collectAsStateWithLifecycle()
    val context = LocalContext.current
    val granted = NotificationManagerCompat.getEnabledListenerPackages(context).contains(context.packageName)

    Column(Modifier.fillMaxSize().padding(12.dp), verticalArrangement = Arrangement.spacedBy(8.dp)) {
        if (!granted) {
            TextButton(onClick = {
                val intent = if (Build.VERSION.SDK_INT >= 30) {
                    Intent(Settings.ACTION_NOTIFICATION_LISTENER_DETAIL_SETTINGS).putExtra(
                        Settings.EXTRA_NOTIFICATION_LISTENER_COMPONENT_NAME,
                        ComponentName(context, ReplyNotificationListener::class.java).flattenToString(),
                    )
                } else {
                    Intent("android.settings.ACTION_NOTIFICATION_LISTENER_SETTINGS")
                }
                context.startActivity(intent)
            }) { Text(stringResource(R.string.grant_notifications)) }
        }
        DemoIncoming(book)
        LazyColumn(verticalArrangement = Arrangement.spacedBy(8.dp)) {
            items(pending, key = { "${it.contact.key}:${it.text}" }) { incoming ->
                IncomingCard(
                    incoming, suggestions[incoming], comparisons[incoming], working == incoming,
                    onSuggest = { model.suggest(incoming) }, onCompare = { model.compare(incoming) }, onSend = { model.send(incoming, it) },
                )
            }
        }
    }
}

/** Types a message "from" a demo contact, for trying the screen without notifications. */
@Composable
private fun DemoIncoming(book: ThreadBook) {
    var text by remember { mutableStateOf("") }
    val threads by book.threads.collectAsStateWithLifecycle()
    val contact = threads.values.firstOrNull()?.contact ?: return
    Row(Modifier.fillMaxWidth()) {
        OutlinedTextField(text, { text = it }, Modifier.weight(1f), placeholder = { Text("A message from ${contact.name}") })
        TextButton(onClick = { book.received(contact, text.trim()); text = "" }, enabled = text.isNotBlank()) { Text("Receive") }
    }
}

@Composable
private fun IncomingCard(
    incoming: Incoming,
    suggestion: Result<ReplySuggestion>?,
    comparison: Result<SpeculationComparison>?,
    working: Boolean,
    onSuggest: () -> Unit,
    onCompare: () -> Unit,
    onSend: (String) -> Unit,
) {
    Card(Modifier.fillMaxWidth()) {
        Column(Modifier.padding(12.dp), verticalArrangement = Arrangement.spacedBy(6.dp)) {
            Text("${incoming.contact.name}: ${incoming.text}", style = MaterialTheme.typography.bodyLarge)
            when {
                working -> LinearProgressIndicator(Modifier.fillMaxWidth().padding(top = 4.dp))
                suggestion == null -> Button(onClick = onSuggest) { Text("Suggest a reply") }
                suggestion.isFailure -> Text(suggestion.exceptionOrNull()?.message ?: "failed", color = MaterialTheme.colorScheme.error)
                else -> {
                    val s = suggestion.getOrThrow()
                    var draft by remember(s) { mutableStateOf(s.text) }
                    OutlinedTextField(draft, { draft = it }, Modifier.fillMaxWidth())
                    Text(
                        "%d tokens · %.1f tok/s · %.2f tokens/step · %d/%d drafted tokens accepted · first token after %.0f ms".format(
                            s.tokens, s.decodeTokensPerS, s.tokensPerStep, s.speculation.acceptedTokens.toInt(),
                            s.speculation.draftedTokens.toInt(), s.timeToFirstTokenMs,
                        ),
                        style = MaterialTheme.typography.labelSmall,
                    )
                    SpeedUp(comparison)
                    // Sending is the user's decision, every time.
                    Row {
                        Button(onClick = { onSend(draft) }) { Text(stringResource(R.string.send)) }
                        TextButton(onClick = onSuggest) { Text("Again") }
                        TextButton(onClick = onCompare) { Text("Compare") }
                    }
                }
            }
        }
    }
}

/** The speed-up speculative decoding gave this reply, measured by running it plainly too. */
@Composable
private fun SpeedUp(comparison: Result<SpeculationComparison>?) {
    val result = comparison ?: return
    val c = result.getOrNull() ?: return Text(result.exceptionOrNull()?.message ?: "failed", color = MaterialTheme.colorScheme.error)
    Text(
        "speed-up %.2f× with speculation: %.1f → %.1f tok/s%s".format(
            c.speedUp, c.plain.decodeTokensPerS, c.speculative.decodeTokensPerS,
            if (c.identical) ", same reply" else ", replies differ",
        ),
        style = MaterialTheme.typography.labelMedium,
    )
}
