// The code shown in docs/ios.md, compiled and run by the Swift suite (main.swift).
// Each `snippet:begin NAME` .. `snippet:end` block is copied verbatim into the page;
// `cargo xtask snippets` rewrites the page from here and the test suite fails when they differ.

import Foundation
import Tern

// snippet:begin load
func loadModel(path: String) async throws -> Engine {
    setLogLevel(level: .info) // model loaded, answers' counts and timings in the unified log
    let engine = try await Engine.load(path: path, options: EngineOptions(contextLength: 2048))
    let info = engine.info()
    print("\(info.name): \(info.nParams) parameters, \(info.kernels) kernels")
    return engine
}
// snippet:end

// snippet:begin stream
func askCapital(engine: Engine) async throws -> String {
    let session = try engine.newSession(options: SessionOptions(maxTokens: 64))
    var answer = ""
    for try await event in session.stream("What is the capital of France?") {
        switch event {
        case .token(let text, _):
            answer += text // show it as it comes
        case .done(let stats):
            print("\(stats.decodeTokensPerS) tokens/s")
        case .toolCall:
            break // only in sessions with tools (see "Tool calls")
        }
    }
    return answer
}
// snippet:end

// snippet:begin cancel
// In an app, keep the Task (e.g. in a view model) and call `task.cancel()` from a Stop button:
// the generation stops within one token.
func startAnswer(session: Session, prompt: String, onText: @escaping @Sendable (String) -> Void) -> Task<Void, Error> {
    Task {
        for try await text in session.stream(prompt).textPieces {
            onText(text)
        }
    }
}
// snippet:end

// snippet:begin errors
func loadOrExplain(path: String) async -> Engine? {
    do {
        return try await Engine.load(path: path)
    } catch TernError.ModelNotFound(let missing) {
        print("no model at \(missing)")
    } catch TernError.InvalidModel(let detail) {
        print("not a usable model file: \(detail)")
    } catch {
        print("cannot load the model: \(error)")
    }
    return nil
}
// snippet:end

// snippet:begin json
func planTrip(engine: Engine) async throws -> String {
    let session = try engine.newSession(options: SessionOptions(maxTokens: 64))
    try await session.setGrammar(grammar: .jsonSchema(schema: """
        {"type": "object",
         "properties": {"city": {"type": "string", "maxLength": 40}, "days": {"type": "integer", "minimum": 1, "maximum": 30}},
         "required": ["city", "days"], "additionalProperties": false}
        """))
    return try await session.reply("Plan a trip to Lyon.").text // e.g. {"city": "Lyon", "days": 3}
}
// snippet:end

// snippet:begin typed
struct TripPlan: Generable {
    let city: String
    let days: Int
    static let jsonSchema = """
        {"type": "object",
         "properties": {"city": {"type": "string", "maxLength": 40}, "days": {"type": "integer", "minimum": 1, "maximum": 30}},
         "required": ["city", "days"], "additionalProperties": false}
        """
}

func planTypedTrip(engine: Engine) async throws -> TripPlan {
    let session = try engine.newSession(options: SessionOptions(maxTokens: 64))
    return try await session.generate("Plan a trip to Lyon.", as: TripPlan.self) // e.g. TripPlan(city: "Lyon", days: 3)
}
// snippet:end

// snippet:begin tools
let weather = Tool(
    name: "get_weather",
    description: "Current weather in a city",
    parameters: #"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}"#
)

func askWithTools(
    session: Session, question: String, fetchWeather: @escaping @Sendable (_ arguments: String) async throws -> String
) async throws -> String {
    let handler = ToolHandler(weather, run: fetchWeather) // {"city": "Paris"} → e.g. {"temperature_c": 18}
    return try await session.reply(question, using: [handler], maxCalls: 3).reply.text
}
// snippet:end

// snippet:begin ui
func nextStep(engine: Engine, screenJson: String, goal: String) async throws -> UiAction {
    let session = try engine.newSession(options: SessionOptions(systemPrompt: uiSystemPrompt()))
    let screen = try screenFromJson(json: screenJson) // {"app": ..., "elements": [{"id", "class", "text", "clickable"}]}
    return try await session.action(on: screen, goal: goal) // e.g. UiAction(action: .tap, id: 2)
}
// snippet:end

// snippet:begin download
@MainActor
func downloadModel(appSupport: URL, url: String, onProgress: (Double) -> Void) async throws -> String {
    let store = try ModelStore.open(dir: appSupport.appendingPathComponent("models").path)
    let spec = knownModel(named: "smollm2")! // size and SHA-256 of SmolLM2-135M Q4_1
    if let path = store.installed(spec: spec) { return path }
    return try await store.fetch(spec, from: url) { done, total in onProgress(Double(done) / Double(total)) }
}
// snippet:end

// snippet:begin speculation
// One store for the app, kept in its files; each contact's thread is one key of it.
func openHistory(appSupport: URL) throws -> HistoryStore {
    try HistoryStore.open(dir: appSupport.appendingPathComponent("history").path)
}

func suggestReply(engine: Engine, history: HistoryStore, contact: String, message: String) async throws -> Reply {
    try history.add(key: contact, text: message) // their words are drafted from too
    let speculation = SpeculationOptions(history: HistoryScope(store: history, key: contact)) // answers join it
    let session = try engine.newSession(options: SessionOptions(maxTokens: 64, speculation: speculation))
    let reply = try await session.reply("Suggest a short reply to: \(message)")
    let s = reply.stats.speculation
    print("\(s.tokensPerStep) tokens per step, \(s.acceptedTokens) of \(s.draftedTokens) drafted accepted")
    return reply
}
// snippet:end

// snippet:begin energy
func loadTuned(path: String, appSupport: URL, deviceModel: String) async throws -> Engine {
    let energy = EnergyOptions(tuningDir: appSupport.path, deviceName: deviceModel) // e.g. "iPhone16,1"
    let engine = try await Engine.load(path: path, options: EngineOptions(energy: energy))
    if engine.energyTuning() == nil { _ = try await engine.tuneEnergy() } // once per device, a few seconds
    return engine
}

// At start and on ProcessInfo.thermalStateDidChangeNotification:
//     engine.report(thermalState: ThermalState(ProcessInfo.processInfo.thermalState))
// snippet:end
