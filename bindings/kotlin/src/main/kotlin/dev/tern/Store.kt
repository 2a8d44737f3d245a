// Model downloads as a Flow: the generated `ModelStore.startDownload` returns a `Download` whose
// events are pulled one by one; here they become a cold Flow whose cancellation cancels the
// download, and a one-call `fetch` that returns the verified file's path.

package dev.tern

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.flow

/**
 * Downloads [spec] from [url] into this store when the flow is collected, emitting its progress:
 * [DownloadEvent.Started], [DownloadEvent.Progress]…, [DownloadEvent.Verifying], then
 * [DownloadEvent.Done] with the path of the verified file ([DownloadEvent.Retrying] after a
 * broken connection, resumed where it broke). A model already in the store gives `Done` alone.
 *
 * The transfer runs on a native thread. Cancelling the collecting coroutine cancels it; what
 * arrived stays on disk and the next download of the same model resumes from it. Failures are
 * thrown as [TernException]: `HashMismatch` (the file was deleted), `SizeMismatch`, `Http`,
 * `Network`, `DownloadInterrupted`, `NotEnoughSpace`, `DownloadInProgress`, `Io`.
 */
fun ModelStore.download(spec: ModelSpec, url: String, options: DownloadOptions = DownloadOptions()): Flow<DownloadEvent> =
    flow {
        startDownload(spec, url, options).use { download -> emitPulled(download::next, download::cancel) }
    }

/**
 * Downloads [spec] from [url] (see [download]) and returns the verified file's path, ready for
 * [Engine.load]. [onProgress] gets the bytes on disk and the total as they grow.
 */
suspend fun ModelStore.fetch(
    spec: ModelSpec,
    url: String,
    options: DownloadOptions = DownloadOptions(),
    onProgress: (downloaded: ULong, total: ULong) -> Unit = { _, _ -> },
): String {
    var path: String? = null
    download(spec, url, options).collect { event ->
        when (event) {
            is DownloadEvent.Progress -> onProgress(event.downloaded, event.total)
            is DownloadEvent.Done -> path = event.path
            else -> {}
        }
    }
    return path ?: throw TernException.Internal("the download ended without its file")
}

/** The known model named [name] (`smollm2`, `qwen2.5`, `gemma3`), if any. */
fun knownModel(name: String): ModelSpec? = knownModels().firstOrNull { it.name == name }
