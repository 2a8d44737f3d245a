// The model picker's logic: which models the app offers, which are on the phone, and the
// progress of downloads (resumed after a dropped connection, checked against their SHA-256
// before use), over Tern's model store.

package dev.tern.sample

import dev.tern.DownloadEvent
import dev.tern.ModelSpec
import dev.tern.ModelStore
import dev.tern.TernException
import dev.tern.knownModels
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Job
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.flow.update
import kotlinx.coroutines.launch

/** A model the app offers: what it is and where the app downloads it from. */
data class CatalogEntry(val spec: ModelSpec, val url: String, val title: String)

sealed interface ModelStatus {
    data object NotInstalled : ModelStatus
    data class Downloading(val downloaded: Long, val total: Long) : ModelStatus {
        val fraction: Float get() = if (total > 0) downloaded.toFloat() / total else 0f
    }
    data object Verifying : ModelStatus
    data class Installed(val path: String) : ModelStatus
    data class Failed(val message: String) : ModelStatus
}

data class ModelRow(val entry: CatalogEntry, val status: ModelStatus)

/**
 * The catalog with each model's status. [download] runs in [scope] (a download outlives the
 * screen that started it); progress updates [rows] about every megabyte.
 */
class ModelPicker(private val store: ModelStore, catalog: List<CatalogEntry>, private val scope: CoroutineScope) {
    private val _rows = MutableStateFlow(catalog.map { ModelRow(it, statusOf(it.spec)) })
    val rows: StateFlow<List<ModelRow>> = _rows.asStateFlow()
    private val jobs = mutableMapOf<String, Job>()

    private fun statusOf(spec: ModelSpec): ModelStatus =
        store.installed(spec)?.let { ModelStatus.Installed(it) } ?: ModelStatus.NotInstalled

    /** Downloads the model named [name] (resuming what an earlier attempt left). */
    fun download(name: String) {
        val entry = _rows.value.firstOrNull { it.entry.spec.name == name }?.entry ?: return
        if (jobs[name]?.isActive == true) return
        set(name, ModelStatus.Downloading(0, entry.spec.size.toLong()))
        jobs[name] = scope.launch {
            try {
                // Abandoning next() (this coroutine cancelled) cancels the download.
                store.startDownload(entry.spec, entry.url).use { download ->
                    while (true) {
                        when (val event = download.next() ?: break) {
                            is DownloadEvent.Started -> set(name, ModelStatus.Downloading(event.from.toLong(), event.total.toLong()))
                            is DownloadEvent.Progress -> set(name, ModelStatus.Downloading(event.downloaded.toLong(), event.total.toLong()))
                            is DownloadEvent.Retrying -> Unit // the bar stays where it was; the transfer resumes there
                            is DownloadEvent.Verifying -> set(name, ModelStatus.Verifying)
                            is DownloadEvent.Done -> set(name, ModelStatus.Installed(event.path))
                        }
                    }
                }
            } catch (e: CancellationException) {
                set(name, statusOf(entry.spec))
                throw e
            } catch (e: TernException) {
                set(name, ModelStatus.Failed(e.message ?: e.toString()))
            }
        }
    }

    /** Waits for the download of [name] to end. */
    suspend fun join(name: String) {
        jobs[name]?.join()
    }

    /** Stops a download; what arrived is kept and the next download resumes from it. */
    fun cancel(name: String) {
        jobs.remove(name)?.cancel()
    }

    /** Deletes the model's file (and any partial download). */
    fun delete(name: String) {
        cancel(name)
        val entry = _rows.value.firstOrNull { it.entry.spec.name == name }?.entry ?: return
        store.delete(entry.spec)
        set(name, ModelStatus.NotInstalled)
    }

    private fun set(name: String, status: ModelStatus) {
        _rows.update { rows -> rows.map { if (it.entry.spec.name == name) it.copy(status = status) else it } }
    }

    companion object {
        /** Tern's known models, downloaded from `baseUrl` + file name (the app serves or mirrors them). */
        fun catalog(baseUrl: String): List<CatalogEntry> =
            knownModels().map { spec ->
                val title = when (spec.name) {
                    "smollm2" -> "SmolLM2 135M (fast, small)"
                    "qwen2.5" -> "Qwen2.5 Coder 0.5B (better answers)"
                    "gemma3" -> "Gemma 3 270M (base model)"
                    else -> spec.name
                }
                CatalogEntry(spec, baseUrl.trimEnd('/') + "/" + spec.fileName, "$title · ${spec.size / 1_000_000u} MB")
            }
    }
}
