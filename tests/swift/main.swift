// The Swift package (generated bindings + bindings/swift) against the real SmolLM2 model, built
// and run by tests/swift/run.sh:
//   tests MODEL PROMPTS.tsv ANSWERS_DIR
// ANSWERS_DIR/<n>.txt holds the Rust session's greedy answer to the n-th prompt.
// The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.

import Foundation
import Tern

/// Compute threads of the suite's engine, as in the Rust reference answers. One: the suite tests
/// the bindings, and a single thread keeps decoding steps short on a busy machine.
let threads: UInt32 = 1

/// Greedy decoding (`SamplingOptions()` as it is): the reference answers are greedy, while a
/// session given no sampling samples as the model recommends.
let greedy = SamplingOptions()

/// Longest time from a cancellation to the end of the Rust generation.
let cancelLimit = Duration.milliseconds(200)

struct Case {
    let maxTokens: UInt32
    let prompt: String
    let expected: String
}

struct Failure: Error, CustomStringConvertible {
    let description: String
}

func expect(_ cond: Bool, _ what: @autoclosure () -> String) throws {
    if !cond { throw Failure(description: what()) }
}

func expectBusy(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch TernError.Busy {
        return
    } catch {
        throw Failure(description: "expected Busy, got \(error)")
    }
    throw Failure(description: "expected Busy, nothing was thrown")
}

@MainActor
func expectThrows<T: Sendable>(_ what: String, _ body: () async throws -> T, matching: (Error) -> Bool) async throws {
    do {
        _ = try await body()
    } catch {
        if matching(error) { return }
        throw Failure(description: "\(what): wrong error \(error)")
    }
    throw Failure(description: "\(what): nothing was thrown")
}

/// Thread-safe storage for what callbacks collect.
final class Collected<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func append(_ item: T) { lock.withLock { items.append(item) } }
    var count: Int { lock.withLock { items.count } }
}

/// Waits until the session's generation thread has ended; the time it took.
@MainActor
func untilIdle(_ session: Session) async throws -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    while session.isBusy() {
        try expect(clock.now - start < .seconds(10), "generation did not stop")
        try await Task.sleep(for: .milliseconds(1))
    }
    return clock.now - start
}

func readCases(prompts: String, answers: String) throws -> [Case] {
    let lines = try String(contentsOfFile: prompts, encoding: .utf8).split(separator: "\n")
        .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    return try lines.enumerated().map { n, line in
        let parts = line.split(separator: "\t", maxSplits: 1)
        let expected = try String(contentsOfFile: "\(answers)/\(n).txt", encoding: .utf8)
        return Case(maxTokens: UInt32(parts[0])!, prompt: String(parts[1]), expected: expected)
    }
}

@MainActor
final class Suite {
    var passed = 0
    var failed = 0

    func test(_ name: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            passed += 1
            print("ok   \(name)")
        } catch {
            failed += 1
            print("FAIL \(name): \(error)")
        }
    }

    func run(model: String, cases: [Case]) async {
        let engine: Engine
        do {
            engine = try await Engine.load(path: model, options: EngineOptions(threads: threads))
        } catch {
            failed += 1
            print("FAIL load engine: \(error)")
            return
        }
        passed += 1
        print("ok   load engine (\(engine.info().kernels) kernels, \(engine.info().threads) threads)")

        await test("streamed text equals the Rust session's greedy answer") {
            for c in cases {
                let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: c.maxTokens))
                var events: [TokenEvent] = []
                for try await event in session.stream(c.prompt) { events.append(event) }
                var text = ""
                var tokens = 0
                for case .token(let piece, let ids) in events {
                    text += piece
                    tokens += ids.count
                }
                try expect(text == c.expected, "prompt '\(c.prompt)': got '\(text)', want '\(c.expected)'")
                guard case .done(let stats) = events.last else { throw Failure(description: "last event is not done") }
                try expect(Int(stats.generatedTokens) == tokens, "stats count \(stats.generatedTokens), stream \(tokens)")
                try expect(session.lastStats() == stats, "lastStats differs from the done event")
                // The last answer token is in the context once the next request feeds it.
                let all = stats.promptTokens + stats.generatedTokens
                try expect((all - 1...all).contains(session.tokenCount()), "tokenCount \(session.tokenCount()) after \(stats)")
            }
        }

        await test("pull-style nextEvent() gives the same answer") {
            let c = cases[0]
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: c.maxTokens))
            let tokens = try session.send(text: c.prompt)
            var text = ""
            var done: Stats?
            while let event = try await tokens.nextEvent() {
                switch event {
                case .token(let piece, _): text += piece
                case .done(let stats): done = stats
                case .toolCall: throw Failure(description: "a tool call without tools")
                }
            }
            try expect(text == c.expected, "got '\(text)'")
            try expect(done != nil, "no done event")
            try expect(try await tokens.nextEvent() == nil, "events after done")
        }

        await test("cancelling the consuming Task stops generation within 200 ms") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 2000, ignoreEos: true))
            let firstToken = AsyncStream<Void>.makeStream()
            let consumer = Task {
                for try await _ in session.stream("Tell me a very long story.") { firstToken.continuation.yield() }
            }
            for await _ in firstToken.stream { break }
            try await Task.sleep(for: .milliseconds(30))
            consumer.cancel()
            let took = try await untilIdle(session)
            try expect(took < cancelLimit, "generation ran on for \(took)")
            let stats = session.lastStats()
            try expect(stats?.finishReason == .cancelled, "finish reason \(String(describing: stats?.finishReason))")
            try expect((stats?.generatedTokens ?? 0) < 2000, "generated \(String(describing: stats?.generatedTokens))")
        }

        await test("cancelling a Task awaiting nextEvent() stops generation within 200 ms") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 2000, ignoreEos: true))
            let tokens = try session.send(text: "Count from one to one thousand.")
            _ = try await tokens.nextEvent() // the first token: generation is decoding now
            let puller = Task {
                while try await tokens.nextEvent() != nil {}
            }
            try await Task.sleep(for: .milliseconds(30))
            puller.cancel()
            let took = try await untilIdle(session)
            try expect(took < cancelLimit, "generation ran on for \(took)")
            try expect(session.lastStats()?.finishReason == .cancelled, "not cancelled")
        }

        await test("Session.cancel() ends the stream with done(cancelled) within 200 ms") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 2000, ignoreEos: true))
            let clock = ContinuousClock()
            var cancelledAt: ContinuousClock.Instant?
            var last: TokenEvent?
            var tokens = 0
            for try await event in session.stream("Write a long poem.") {
                last = event
                tokens += 1
                if tokens == 3 {
                    cancelledAt = clock.now
                    session.cancel()
                }
            }
            let took = clock.now - cancelledAt!
            guard case .done(let stats) = last, stats.finishReason == .cancelled else {
                throw Failure(description: "ended with \(String(describing: last))")
            }
            try expect(took < cancelLimit, "done came \(took) after cancel")
            // The conversation keeps what was said: the session answers again afterwards.
            var more = 0
            for try await _ in session.stream("Thanks.") {
                more += 1
                if more == 2 { break }
            }
            try expect(more == 2, "no answer after a cancel")
        }

        await test("two sessions on one engine answer at the same time, each as if alone") {
            let (a, b) = (cases[0], cases[1])
            let sa = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: a.maxTokens))
            let sb = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: b.maxTokens))
            async let ra = sa.reply(a.prompt)
            async let rb = sb.reply(b.prompt)
            let (replyA, replyB) = try await (ra, rb)
            try expect(replyA.text == a.expected, "session A: '\(replyA.text)'")
            try expect(replyB.text == b.expected, "session B: '\(replyB.text)'")
        }

        await test("a second send while answering is Busy; reset empties the context") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 2000, ignoreEos: true))
            let tokens = try session.send(text: "Count to one hundred.")
            try expectBusy { _ = try session.send(text: "Hello") }
            try expectBusy { try session.reset() }
            _ = try await tokens.nextEvent() // a token, so the context holds something
            tokens.cancel()
            while try await tokens.nextEvent() != nil {}
            _ = try await untilIdle(session)
            try expect(session.tokenCount() > 0, "nothing in the context after an answer")
            try session.reset()
            try expect(session.tokenCount() == 0, "tokenCount \(session.tokenCount()) after reset")
            for try await _ in session.stream(cases[2].prompt) { break }
            _ = try await untilIdle(session)
            try expect(session.lastStats()?.cachedTokens == 0, "cache reused after reset")
        }

        await test("setMessages rewinds the conversation; the question asked again comes from the cache") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 24))
            let first = try await session.reply("Name a color.")
            let second = try await session.reply("Name another one.")
            let conversation = session.messages()
            let expected = [
                ConversationMessage(role: .user, content: "Name a color."),
                ConversationMessage(role: .assistant, content: first.text),
                ConversationMessage(role: .user, content: "Name another one."),
                ConversationMessage(role: .assistant, content: second.text),
            ]
            try expect(conversation == expected, "messages \(conversation)")
            let tokens = session.tokenCount()
            try session.setMessages(messages: Array(conversation.prefix(2)))
            try expect(session.messages() == Array(conversation.prefix(2)), "messages \(session.messages()) after setMessages")
            try expect(session.tokenCount() == tokens, "the KV cache changed before the next request")
            let again = try await session.reply("Name another one.")
            try expect(again.text == second.text, "greedy answer '\(again.text)', first time '\(second.text)'")
            // Only the prompt's last token is computed again: its logits pick the first answer token.
            try expect(again.stats.promptTokens == second.stats.promptTokens, "prompt \(again.stats) vs \(second.stats)")
            try expect(
                again.stats.cachedTokens == again.stats.promptTokens - 1,
                "cached \(again.stats.cachedTokens) of \(again.stats.promptTokens)"
            )
            try expect(session.messages() == expected, "messages \(session.messages()) after asking again")
        }

        await test("prewarm computes the prompt's start; the first answer reuses it unchanged") {
            let options = SessionOptions(systemPrompt: "You are a terse assistant.", sampling: greedy, maxTokens: 16)
            let warm = try engine.newSession(options: options)
            let prewarmed = try await warm.prewarm()
            try expect(prewarmed > 0 && warm.tokenCount() == prewarmed, "prewarmed \(prewarmed)")
            let answer = try await warm.reply("Name a color.")
            try expect(answer.stats.cachedTokens == prewarmed, "cached \(answer.stats.cachedTokens) of \(prewarmed)")
            let cold = try await engine.newSession(options: options).reply("Name a color.")
            try expect(answer.text == cold.text, "'\(answer.text)' after prewarm, '\(cold.text)' without")
        }

        await test("a transcript encodes to the SDK's JSON and restores the conversation") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 8))
            _ = try await session.reply("Name a color.")
            let saved = try JSONEncoder().encode(session.messages())
            let text = String(decoding: saved, as: UTF8.self)
            // The Rust SDK reads it, and writes the same conversation.
            try expect(try messagesFromJson(json: text) == session.messages(), "transcript \(text)")
            let written = try JSONDecoder().decode([ConversationMessage].self, from: Data(messagesToJson(messages: session.messages()).utf8))
            try expect(written == session.messages(), "the SDK's transcript decodes to \(written)")
            let restored = try JSONDecoder().decode([ConversationMessage].self, from: saved)
            let other = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 8))
            try other.setMessages(messages: restored)
            try expect(other.messages() == session.messages(), "restored \(other.messages())")
            let bad = Data(#"[{"role": "robot", "content": "x"}]"#.utf8)
            try expect((try? JSONDecoder().decode([ConversationMessage].self, from: bad)) == nil, "an unknown role decoded")
        }

        await test("state streams: an engine loads or fails, a session is responding while it answers") {
            var last: EngineState = .loading
            for await state in Engine.loadStates(path: model, options: EngineOptions(threads: threads)) { last = state }
            guard case .ready = last else { throw Failure(description: "loaded \(last)") }
            for await state in Engine.loadStates(path: "/no/such/model.gguf") { last = state }
            guard case .failed(.ModelNotFound) = last else { throw Failure(description: "missing \(last)") }

            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 8))
            let seen = Flags()
            let watcher = Task { for await busy in session.respondingUpdates() { await seen.add(busy) } }
            _ = try await session.reply("Name a color.")
            // The observer is told on the generating thread: wait until the last change arrived.
            for _ in 0..<500 {
                let flags = await seen.all
                if flags.contains(true) && flags.last == false { break }
                try await Task.sleep(nanoseconds: 2_000_000)
            }
            watcher.cancel()
            let flags = await seen.all
            try expect(flags.contains(true) && flags.last == false, "states \(flags)")
        }

        await test("setMessages while answering is Busy and keeps the conversation") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 2000, ignoreEos: true))
            let tokens = try session.send(text: "Count to one hundred.")
            _ = try await tokens.nextEvent()
            // The conversation as of the last finished answer: the question joins with its answer.
            try expect(session.messages().isEmpty, "messages \(session.messages()) while answering")
            try expectBusy { try session.setMessages(messages: []) }
            tokens.cancel()
            while try await tokens.nextEvent() != nil {}
            _ = try await untilIdle(session)
            let roles = session.messages().map(\.role)
            try expect(roles == [.user, .assistant], "roles \(roles) after a stopped answer")
            try session.setMessages(messages: [])
            try expect(session.messages().isEmpty, "messages \(session.messages()) after setMessages([])")
        }

        await test("a bad model path raises ModelNotFound") {
            try await expectThrows("load", { try await Engine.load(path: "/nonexistent/dir/model.gguf") }) {
                if case TernError.ModelNotFound(let path) = $0 { return path.contains("nonexistent") }
                return false
            }
        }

        await test("a corrupt file raises InvalidModel") {
            let dir = FileManager.default.temporaryDirectory
            let garbage = dir.appendingPathComponent("tern-garbage-\(getpid()).gguf")
            let truncated = dir.appendingPathComponent("tern-truncated-\(getpid()).gguf")
            defer {
                try? FileManager.default.removeItem(at: garbage)
                try? FileManager.default.removeItem(at: truncated)
            }
            try Data("this is not a model file, just some text".utf8).write(to: garbage)
            try await expectThrows("garbage", { try await Engine.load(path: garbage.path) }) {
                if case TernError.InvalidModel = $0 { return true }
                return false
            }
            // The real file's first megabyte: a valid header whose tensors lie past the end.
            let head = try FileHandle(forReadingFrom: URL(fileURLWithPath: model)).read(upToCount: 1 << 20) ?? Data()
            try head.write(to: truncated)
            try await expectThrows("truncated", { try await Engine.load(path: truncated.path) }) {
                if case TernError.InvalidModel(let detail) = $0 { return !detail.isEmpty }
                return false
            }
        }

        await test("invalid options raise InvalidOption") {
            try await expectThrows("maxTokens 0", { try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 0)) }) {
                if case TernError.InvalidOption = $0 { return true }
                return false
            }
            try await expectThrows("kernels", { try await Engine.load(path: model, options: EngineOptions(kernels: "no-such-isa")) }) {
                if case TernError.InvalidOption = $0 { return true }
                return false
            }
        }

        await test("awaiting an answer never blocks the caller's thread") {
            // This suite runs on the main actor: the ticker only runs while the answer is awaited.
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 32, ignoreEos: true))
            var ticks = 0
            let ticker = Task { @MainActor in
                while !Task.isCancelled {
                    ticks += 1
                    try? await Task.sleep(for: .milliseconds(1))
                }
            }
            let reply = try await session.reply("Tell me about the sea.")
            ticker.cancel()
            try expect(reply.stats.generatedTokens == 32, "generated \(reply.stats.generatedTokens)")
            try expect(ticks > 10, "the caller's thread was blocked (ticks=\(ticks))")
        }

        await test("kernel sets are listed and each one loads") {
            let sets = availableKernels()
            try expect(sets.first == "reference", "sets \(sets)")
            let e = try await Engine.load(path: model, options: EngineOptions(kernels: sets.last))
            try expect(e.info().kernels == sets.last, "loaded with \(e.info().kernels)")
        }

        await test("docs/ios.md samples run") {
            let e = try await loadModel(path: model)
            // The snippet samples as the model recommends, so its answer varies from run to run.
            let answer = try await askCapital(engine: e)
            try expect(!answer.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "answer '\(answer)'")
            // The suite's one-thread engine: see `threads`.
            let session = try engine.newSession()
            let pieces = Collected<String>()
            let task = startAnswer(session: session, prompt: "Tell me a long story.") { pieces.append($0) }
            while pieces.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
            task.cancel()
            try expect(try await untilIdle(session) < cancelLimit, "generation ran on after task.cancel()")
            try expect(await loadOrExplain(path: "/nonexistent/model.gguf") == nil, "no error")
            setLogLevel(level: .off)
        }

        await structuredTests(engine: engine)
        await docSampleTests(engine: engine, model: model)
        await speculationTests(engine: engine)
        await storeTests()
        await energyTests(model: model)
    }
}

let args = CommandLine.arguments
guard args.count == 4 else {
    print("usage: tests MODEL PROMPTS.tsv ANSWERS_DIR")
    exit(2)
}
let suite = Suite()
await suite.run(model: args[1], cases: try readCases(prompts: args[2], answers: args[3]))
print("\(suite.passed) passed, \(suite.failed) failed")
exit(suite.failed == 0 ? 0 : 1)
