// The Models tab: the models the app offers, download progress, and which one the app uses.

package dev.tern.sample.app

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
import androidx.compose.material3.OutlinedButton
import androidx.compose.material3.Text
import androidx.compose.material3.TextButton
import androidx.compose.runtime.Composable
import androidx.compose.runtime.getValue
import androidx.compose.ui.Modifier
import androidx.compose.ui.unit.dp
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import dev.tern.sample.ModelPicker
import dev.tern.sample.ModelRow
import dev.tern.sample.ModelStatus

/**
 * Where the sample downloads models from. The files are published inside PyPI packages, not at
 * one URL: serve `~/.cache/tern/models` from the development machine
 * (`python3 -m http.server 8000` there, then `adb reverse tcp:8000 tcp:8000`), or put your own
 * mirror here. The SHA-256 of each known model pins the exact file, whatever the server.
 */
const val MODEL_BASE_URL = "http://127.0.0.1:8000/"

/** One picker per process: downloads go on while the user looks at other tabs. */
private val picker: ModelPicker by lazy {
    val app = TernSampleApp.instance
    ModelPicker(app.store, ModelPicker.catalog(MODEL_BASE_URL), app.appScope)
}

@Composable
fun ModelPickerScreen(app: TernSampleApp) {
    val rows by picker.rows.collectAsStateWithLifecycle()
    val engine by app.engine.collectAsStateWithLifecycle()
    val inUse = when (val e = engine) {
        is EngineState.Ready -> e.path
        is EngineState.Loading -> e.path
        else -> null
    }
    LazyColumn(Modifier.fillMaxSize().padding(12.dp), verticalArrangement = Arrangement.spacedBy(8.dp)) {
        items(rows, key = { it.entry.spec.name }) { row -> ModelCard(row, inUse, onUse = app::load) }
    }
}

@Composable
private fun ModelCard(row: ModelRow, inUse: String?, onUse: (String) -> Unit) {
    val name = row.entry.spec.name
    Card(Modifier.fillMaxWidth()) {
        Column(Modifier.padding(12.dp), verticalArrangement = Arrangement.spacedBy(6.dp)) {
            Text(row.entry.title, style = MaterialTheme.typography.titleMedium)
            when (val s = row.status) {
                ModelStatus.NotInstalled -> Button(onClick = { picker.download(name) }) { Text("Download") }
                is ModelStatus.Downloading -> {
                    LinearProgressIndicator(progress = { s.fraction }, modifier = Modifier.fillMaxWidth())
                    Row {
                        Text("%.0f of %.0f MB".format(s.downloaded / 1e6, s.total / 1e6), Modifier.weight(1f))
                        TextButton(onClick = { picker.cancel(name) }) { Text("Pause") }
                    }
                }
                ModelStatus.Verifying -> {
                    LinearProgressIndicator(Modifier.fillMaxWidth())
                    Text("Checking the file…")
                }
                is ModelStatus.Installed -> Row(horizontalArrangement = Arrangement.spacedBy(8.dp)) {
                    if (s.path == inUse) Text("In use", style = MaterialTheme.typography.labelLarge)
                    else Button(onClick = { onUse(s.path) }) { Text("Use") }
                    OutlinedButton(onClick = { picker.delete(name) }, enabled = s.path != inUse) { Text("Delete") }
                }
                is ModelStatus.Failed -> {
                    Text(s.message, color = MaterialTheme.colorScheme.error)
                    Button(onClick = { picker.download(name) }) { Text("Try again") }
                }
            }
        }
    }
}
