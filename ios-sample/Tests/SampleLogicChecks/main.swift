// The sample's logic (TernSampleLogic) against the real SmolLM2 model, on a Mac with
// `swift run SampleLogicChecks MODEL CASES_DIR` and on Linux by tests/ios-sample/run.sh.
// CASES_DIR holds the dev workloads' `ui` and `reply` cases (tests/samples/cases.py).
// The last line printed is "N passed, M failed"; the exit status is non-zero on any failure.

import Foundation
import Tern
import TernSampleLogic

struct Failure: Error, CustomStringConvertible {
    let description: String
}

func expect(_ cond: Bool, _ what: @autoclosure () -> String) throws {
    if !cond { throw Failure(description: what()) }
}

var passed = 0
var failed = 0

@MainActor
func test(_ name: String, _ body: @MainActor () async throws -> Void) async {
    do {
        try await body()
        passed += 1
        print("ok   \(name)")
    } catch {
        failed += 1
        print("FAIL \(name): \(error)")
    }
}

/// Polls `cond` every millisecond for up to `seconds`.
@MainActor
func eventually(_ what: String, seconds: Double = 60, _ cond: @MainActor () -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !cond() {
        try expect(ContinuousClock.now < deadline, "timed out waiting for \(what)")
        try await Task.sleep(for: .milliseconds(1))
    }
}

func fmt(_ x: Double?, _ digits: Int = 1) -> String {
    x.map { String(format: "%.\(digits)f", $0) } ?? "-"
}

let args = CommandLine.arguments
guard args.count == 3 || args.count == 4 else {
    print("usage: SampleLogicChecks MODEL CASES_DIR [MODEL_SERVER_URL]")
    exit(2)
}
let casesDir = URL(fileURLWithPath: args[2])
let greedy = ChatSettings(maxTokens: 24, temperature: 0)

let engine: Engine
do {
    // One compute thread: short decoding steps on a busy machine.
    engine = try await Engine.load(path: args[1], options: EngineOptions(threads: 1))
} catch {
    print("FAIL load engine: \(error)")
    print("0 passed, 1 failed")
    exit(1)
}

// MARK: chat

await test("chat streams the answer into its state, with the engine's figures at the end") {
    let question = "What is the capital of France?"
    let plain = try await engine.newSession(options: SessionOptions(sampling: SamplingOptions(), maxTokens: 24)).reply(question).text
    let chat = try ChatViewModel(engine: engine, settings: greedy)
    try expect(chat.send(question), "send refused")
    var partials: [String] = []
    while chat.generating {
        if let last = chat.messages.last, last.streaming, partials.last != last.text { partials.append(last.text) }
        try await Task.sleep(for: .milliseconds(1))
    }
    let answer = chat.messages.last!
    try expect(chat.error == nil, "error: \(chat.error ?? "")")
    try expect(answer.role == .assistant && answer.text == plain, "shown '\(answer.text)', plain session '\(plain)'")
    try expect(Set(partials).count >= 3, "the answer did not stream: \(partials)")
    try expect(partials.allSatisfy { plain.hasPrefix($0) }, "a partial text is not a prefix")
    let m = try answer.metrics ?? { throw Failure(description: "no figures") }()
    try expect((1...24).contains(m.tokens) && (m.timeToFirstTokenMs ?? 0) > 0 && (m.tokensPerSecond ?? 0) > 0, "figures \(m)")
    let energy = m.energy.map { String(format: "%.1f mJ/token (%@, %@)", $0.millijoulesPerToken, $0.measured ? "measured" : "estimated", $0.meter) }
    print("     TTFT \(fmt(m.timeToFirstTokenMs, 0)) ms, \(fmt(m.tokensPerSecond)) tokens/s, \(m.tokens) tokens, energy mode \(chat.energyMode), \(energy ?? "no energy figure")")
}

await test("stop ends the answer where it is; a follow-up reuses the conversation") {
    var settings = greedy
    settings.maxTokens = 200
    let chat = try ChatViewModel(engine: engine, settings: settings)
    chat.send("Write a long story about a dragon who learns to bake bread.")
    try await eventually("3 tokens") { (chat.messages.last?.metrics?.tokens ?? 0) >= 3 }
    let stoppedAt = ContinuousClock.now
    chat.stop()
    try await eventually("the end of the answer") { !chat.generating }
    try expect(ContinuousClock.now - stoppedAt < .milliseconds(500), "stop took \(ContinuousClock.now - stoppedAt)")
    let answer = chat.messages.last!
    try expect(answer.stopped && answer.metrics?.finishReason == .cancelled, "not marked stopped: \(answer)")
    try expect((answer.metrics?.tokens ?? 200) < 200, "ran to the limit")
    try expect(chat.send("Give it a name."), "follow-up refused")
    await chat.waitUntilDone()
    try expect(chat.error == nil && chat.messages.count == 4, "after follow-up: \(chat.messages.count) messages, \(chat.error ?? "")")
    try expect((chat.messages.last?.metrics?.cachedTokens ?? 0) > 0, "the follow-up reused no tokens")
}

await test("the energy mode switches for the engine and shows in the state") {
    let chat = try ChatViewModel(engine: engine, settings: greedy)
    chat.setEnergyMode(.powerSaver)
    try expect(chat.energyMode == "Power saver", "mode \(chat.energyMode)")
    chat.setEnergyMode(.balanced)
    try expect(chat.energyMode == "Balanced", "mode \(chat.energyMode)")
}

await test("regenerate answers the last question again; greedy gives the same text") {
    var settings = greedy
    settings.maxTokens = 12
    let chat = try ChatViewModel(engine: engine, settings: settings)
    chat.send("Name a fruit.")
    await chat.waitUntilDone()
    chat.send("And a vegetable?")
    await chat.waitUntilDone()
    let before = chat.messages.map(\.text)
    let firstCached = chat.messages.last?.metrics?.cachedTokens ?? 0
    try expect(chat.regenerate(), "regenerate refused")
    await chat.waitUntilDone()
    try expect(chat.error == nil, "error: \(chat.error ?? "")")
    try expect(chat.messages.map(\.text) == before, "before \(before), after \(chat.messages.map(\.text))")
    // The same session: the question itself comes from the KV cache now, the first turn did before.
    let again = chat.messages.last?.metrics?.cachedTokens ?? 0
    try expect(again > firstCached, "cached tokens: first answer \(firstCached), regenerated \(again)")
}

await test("regenerate with a seed continues the session's random stream") {
    let seeded = ChatSettings(maxTokens: 12, temperature: 0.9, seed: 7)
    let session = try engine.newSession(options: seeded.sessionOptions())
    _ = try await session.reply("Name a fruit.")
    _ = try await session.reply("And a vegetable?")
    try session.setMessages(messages: Array(session.messages().prefix(2)))
    let expected = try await session.reply("And a vegetable?").text
    let chat = try ChatViewModel(engine: engine, settings: seeded)
    chat.send("Name a fruit.")
    await chat.waitUntilDone()
    chat.send("And a vegetable?")
    await chat.waitUntilDone()
    try expect(chat.regenerate(), "regenerate refused")
    await chat.waitUntilDone()
    try expect(chat.error == nil, "error: \(chat.error ?? "")")
    let text = chat.messages.last?.text ?? ""
    try expect(chat.messages.count == 4 && text == expected, "regenerated '\(text)', session '\(expected)'")
}

await test("cancelling the answer's Task stops the generation in Rust") {
    var settings = greedy
    settings.maxTokens = 200
    let chat = try ChatViewModel(engine: engine, settings: settings)
    chat.send("Tell me everything about the history of Rome.")
    try await eventually("2 tokens") { (chat.messages.last?.metrics?.tokens ?? 0) >= 2 }
    let cancelledAt = ContinuousClock.now
    chat.cancelTask()
    try await eventually("the generation to stop", seconds: 2) { !chat.answering }
    let stoppedIn = ContinuousClock.now - cancelledAt
    await chat.waitUntilDone()
    let last = chat.messages.last!
    try expect(last.stopped && !last.streaming, "answer after cancel: \(last)")
    try expect(stoppedIn < .milliseconds(200), "the generation ran on for \(stoppedIn)")
    print("     generation stopped \(stoppedIn) after the cancel")
}

// MARK: replies

struct ReplyCase {
    let id: String
    let me: String
    let thread: ContactThread
    let incoming: String
}

func readReplyCases() throws -> [ReplyCase] {
    let dir = casesDir.appendingPathComponent("reply")
    let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".tsv") }.sorted()
    return try files.map { name in
        let lines = try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").map(String.init)
        let me = lines[0]
        let rows = lines.dropFirst().map { $0.split(separator: "\t", maxSplits: 1).map(String.init) }
        let contact = rows.first { $0[0] != me }![0]
        let messages = rows.dropLast().map { ThreadMessage(fromMe: $0[0] == me, text: $0[1]) }
        return ReplyCase(
            id: String(name.dropLast(4)), me: me,
            thread: ContactThread(contact: Contact(key: contact, name: contact), messages: messages),
            incoming: rows.last![1])
    }
}

await test("the prompt shows the thread; replies lose the name and quotes small models add") {
    let (thread, incoming) = ContactThread.demo[0]
    let prompt = ReplySuggester(engine: engine, me: "Sam").userMessage(thread: thread, incoming: incoming)
    try expect(prompt.contains("Sam: sure thing, I'll bring the extra harness\nPriya: \(incoming)\n"), prompt)
    try expect(cleanReply("Sam: \"ok, see you\"\nmore text", me: "Sam") == "ok, see you", "cleanReply")
}

let historyDir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-sample-history-\(ProcessInfo.processInfo.processIdentifier)")
let history = try HistoryStore.open(dir: historyDir.path)

await test("the contact's history: seeded from the thread once, then what the user sends") {
    let suggester = ReplySuggester(engine: engine, me: "Sam", history: history)
    let priya = ContactThread.demo[0].thread, mom = ContactThread.demo[1].thread
    try suggester.seedHistory(priya)
    var longer = priya
    longer.messages.append(ThreadMessage(fromMe: true, text: "not seeded twice"))
    try suggester.seedHistory(longer)
    let seeded = try history.texts(key: priya.contact.key)
    try expect(seeded == priya.messages.map(\.text), "history \(seeded)")
    try suggester.remember(ThreadMessage(fromMe: true, text: "see you at 6"), of: priya.contact)
    try expect(try history.texts(key: priya.contact.key).last == "see you at 6", "the sent reply is not kept")
    try expect(try history.texts(key: mom.contact.key).isEmpty, "contacts share a history")
    try history.clear(key: priya.contact.key)
}

await test("reply suggestions for the reply workloads: speculation from the contact's history, same answer, speed-up") {
    let cases = try readReplyCases()
    try expect(!cases.isEmpty, "no reply cases")
    var speedUps: [Double] = []
    var verifySteps = 0
    for c in cases {
        // Verifying whatever is drafted: automatic speculation decides from timings, which on a busy
        // machine may verify nothing at all; the answer must be the same either way.
        let suggester = ReplySuggester(
            engine: engine, me: c.me, maxTokens: 32, history: history, speculation: .limits(limits: DraftLimits(adaptive: false)))
        let prompt = suggester.userMessage(thread: c.thread, incoming: c.incoming)
        try expect(prompt.hasSuffix("\(c.thread.contact.name): \(c.incoming)\n\nWrite \(c.me)'s reply to the last message."), prompt)
        try history.clear(key: c.thread.contact.key)
        try suggester.seedHistory(c.thread)
        let r = try await suggester.compare(thread: c.thread, incoming: c.incoming)
        let s = r.speculative, spec = s.speculation
        try expect(!s.text.isEmpty && !s.text.hasPrefix("\(c.me):"), "\(c.id): suggestion '\(s.text)'")
        try expect(r.identical, "\(c.id): speculation changed the answer: '\(r.plain.answer)' vs '\(s.answer)'")
        try expect((1...32).contains(s.tokens) && s.decodeTokensPerS > 0 && r.plain.decodeTokensPerS > 0, "\(c.id): figures \(s)")
        try expect(r.plain.speculation.verifySteps == 0 && r.plain.tokensPerStep == 1, "\(c.id): plain decoding speculated: \(r.plain.speculation)")
        // A case with nothing to draft decodes plainly.
        try expect(spec.acceptedTokens <= spec.draftedTokens && (spec.verifySteps > 0 || s.tokensPerStep == 1) && s.tokensPerStep >= 1, "\(c.id): speculation \(spec)")
        verifySteps += Int(spec.verifySteps)
        speedUps.append(r.speedUp)
        print("     \(c.id): '\(s.text)' (\(s.tokens) tokens; \(fmt(r.plain.decodeTokensPerS)) -> \(fmt(s.decodeTokensPerS)) tokens/s, speed-up \(fmt(r.speedUp, 2))x; \(spec.verifySteps) verify steps, \(spec.acceptedTokens)/\(spec.draftedTokens) drafted tokens accepted, \(fmt(s.tokensPerStep, 2)) tokens/step)")
    }
    try expect(verifySteps > 0, "speculation verified no draft in any reply case")
    print("     median speed-up \(fmt(speedUps.sorted()[speedUps.count / 2], 2))x, \(verifySteps) verify steps (one run each, timings are noisy)")
}
try? history.clearAll()
try? FileManager.default.removeItem(at: historyDir)


await agentChecks()

// MARK: model picker

if args.count == 4 {
    await test("the model picker downloads a known model with progress; it loads, and delete removes it") {
        let file = URL(fileURLWithPath: args[1]).lastPathComponent
        let spec = try knownModels().first { $0.fileName == file } ?? { throw Failure(description: "\(file) is not a known model") }()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-picker-\(ProcessInfo.processInfo.processIdentifier)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let picker = ModelPicker(store: try ModelStore.open(dir: dir.path), catalog: [CatalogEntry(spec: spec, url: args[3] + file, title: spec.name)])
        try expect(picker.statuses[spec.name] == .notInstalled, "installed before the download")
        picker.download(spec.name)
        var seen: [ModelStatus] = []
        while true {
            let status = picker.statuses[spec.name]!
            if seen.last != status { seen.append(status) }
            if case .installed = status { break }
            if case .failed(let message) = status { throw Failure(description: message) }
            try await Task.sleep(for: .milliseconds(1))
        }
        await picker.waitUntilDone(spec.name)
        let progress = seen.compactMap { s -> UInt64? in if case .downloading(let d, _) = s { return d } else { return nil } }
        try expect(progress.count >= 3 && progress == progress.sorted(), "progress \(progress)")
        try expect(seen.contains(.verifying), "no verification step: \(seen)")
        guard case .installed(let path) = seen.last! else { throw Failure(description: "ended \(seen.last!)") }
        let loaded = try await Engine.load(path: path, options: EngineOptions(threads: 1))
        try expect(loaded.info().architecture == "llama", loaded.info().architecture)
        picker.delete(spec.name)
        try expect(picker.statuses[spec.name] == .notInstalled && !FileManager.default.fileExists(atPath: path), "delete left \(path)")
        print("     \(progress.count) progress updates, \(spec.size / 1_000_000) MB verified and loaded")
    }
}

print("\(passed) passed, \(failed) failed")
exit(failed == 0 ? 0 : 1)
