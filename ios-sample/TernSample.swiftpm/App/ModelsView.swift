// The Models tab: the models the app offers, download progress, and which one the app uses.

import SwiftUI
import TernSampleLogic

struct ModelsView: View {
    let model: AppModel

    var body: some View {
        NavigationStack {
            Group {
                if let picker = model.picker {
                    List(picker.catalog) { entry in
                        row(entry, picker.statuses[entry.spec.name] ?? .notInstalled, picker)
                    }
                } else {
                    ContentUnavailableView("No model folder", systemImage: "externaldrive.badge.xmark")
                }
            }
            .navigationTitle("Models")
        }
    }

    @ViewBuilder
    private func row(_ entry: CatalogEntry, _ status: ModelStatus, _ picker: ModelPicker) -> some View {
        VStack(alignment: .leading, spacing: 6) {
            Text(entry.title).font(.headline)
            switch status {
            case .notInstalled:
                Button("Download") { picker.download(entry.spec.name) }
            case .downloading(let downloaded, let total):
                ProgressView(value: Double(downloaded), total: Double(max(total, 1)))
                HStack {
                    Text(String(format: "%.0f of %.0f MB", Double(downloaded) / 1e6, Double(total) / 1e6))
                    Spacer()
                    Button("Pause") { picker.cancel(entry.spec.name) }
                }
            case .verifying:
                ProgressView("Checking the file…")
            case .installed(let path):
                HStack {
                    if path == model.pathInUse {
                        Text("In use").foregroundStyle(.secondary)
                    } else {
                        Button("Use") { Task { await model.load(path: path) } }
                    }
                    Spacer()
                    Button("Delete", role: .destructive) { picker.delete(entry.spec.name) }.disabled(path == model.pathInUse)
                }
            case .failed(let message):
                Text(message).foregroundStyle(.red)
                Button("Try again") { picker.download(entry.spec.name) }
            }
        }
        .buttonStyle(.borderless)
    }
}
