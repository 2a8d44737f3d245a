// The model picker's check (run from AppLogicTest.kt's main): a download from an HTTP server on
// loopback, with progress, into a fresh store; the installed file loads; delete removes it.

package dev.tern.sample

import com.sun.net.httpserver.HttpServer
import dev.tern.*
import java.io.File
import java.net.InetSocketAddress
import java.nio.file.Files
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.launch

suspend fun CoroutineScope.modelPicker(modelPath: String) {
    test("the model picker downloads a known model with progress; it loads, and delete removes it") {
        val model = File(modelPath)
        val spec = knownModels().first { it.fileName == model.name }
        val server = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        server.createContext("/") { exchange ->
            exchange.sendResponseHeaders(200, model.length())
            exchange.responseBody.use { out -> model.inputStream().use { it.copyTo(out, 1 shl 16) } }
        }
        server.start()
        val dir = Files.createTempDirectory("tern-picker").toFile()
        try {
            val url = "http://127.0.0.1:${server.address.port}/${model.name}"
            val picker = ModelPicker(ModelStore.open(dir.path), listOf(CatalogEntry(spec, url, spec.name)), this)
            expect(picker.rows.value.single().status == ModelStatus.NotInstalled) { "installed before the download" }
            val seen = mutableListOf<ModelStatus>()
            val watcher = launch { picker.rows.collect { seen += it.single().status } }
            picker.download(spec.name)
            picker.join(spec.name)
            watcher.cancel()
            val end = picker.rows.value.single().status
            expect(end is ModelStatus.Installed) { "ended $end" }
            val downloading = seen.filterIsInstance<ModelStatus.Downloading>()
            expect(downloading.size >= 3 && downloading.zipWithNext().all { (a, b) -> a.downloaded <= b.downloaded }) {
                "progress ${downloading.map { it.downloaded }}"
            }
            expect(ModelStatus.Verifying in seen) { "no verification step: $seen" }
            val path = (end as ModelStatus.Installed).path
            Engine.load(path, EngineOptions(threads = 1u)).use { expect(it.info().architecture == "llama") { it.info().architecture } }
            picker.delete(spec.name)
            expect(picker.rows.value.single().status == ModelStatus.NotInstalled && !File(path).exists()) { "delete left ${File(path)}" }
            println("     ${downloading.size} progress updates, ${model.length() / 1_000_000} MB verified and loaded")
        } finally {
            server.stop(0)
            dir.deleteRecursively()
        }
    }
}
