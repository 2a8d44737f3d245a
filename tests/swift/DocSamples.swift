// The code shown in docs/ios.md, compiled and run by the Swift suite (main.swift).
// Each `snippet:begin NAME` .. `snippet:end` block is copied verbatim into the page;
// `cargo xtask snippets` rewrites the page from here and the test suite fails when they differ.

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
