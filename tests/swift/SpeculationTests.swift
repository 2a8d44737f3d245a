// Speculative decoding through the Swift package, on the real SmolLM2 model: the greedy answer
// is the same with speculation as without, drafts are verified and accepted, and a HistoryStore
// keyed by contact feeds a later session until it is cleared. Called from main.swift.

import Foundation
import Tern

/// A context-heavy request: the summary repeats the passage's words.
private let summary = "Summarise in two sentences: The town library will close for renovation from 3 March "
    + "to 28 April. During the closure, books can be returned to the drop box at the town hall, and the mobile "
    + "library will visit the market square every Saturday morning. The renovated library will have a larger "
    + "children's section, a quiet study room and longer opening hours on weekdays."

/// Every draft verified, whatever it costs on this machine: what is accepted depends on the drafts only.
private let always = Speculation.limits(limits: DraftLimits(maxDraftTokens: 16, maxDepth: 12, adaptive: false))

private func answer(_ engine: Engine, _ speculation: SpeculationOptions, _ prompt: String) async throws -> Reply {
    let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 48, speculation: speculation))
    return try await session.reply(prompt)
}

private func temporaryDirectory() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-history-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

extension Suite {
    func speculationTests(engine: Engine) async {
        await test("speculation keeps the greedy answer of a summary and accepts drafts") {
            let plain = try await answer(engine, SpeculationOptions(mode: .off), summary)
            try expect(plain.stats.speculation.verifySteps == 0, "off verified drafts: \(plain.stats.speculation)")
            // Auto verifies where the measured costs say it pays, so how much it drafts varies
            // with the machine's load; the answer does not.
            let auto = try await answer(engine, SpeculationOptions(), summary)
            try expect(auto.text == plain.text, "with speculation '\(auto.text)', without '\(plain.text)'")
            let a = auto.stats.speculation
            try expect(a.acceptedTokens <= a.draftedTokens && a.verifySteps <= a.decodePasses, "\(a)")
            // Every draft verified: the same answer, with drafts accepted from the passage.
            let fast = try await answer(engine, SpeculationOptions(mode: always), summary)
            try expect(fast.text == plain.text, "with limits '\(fast.text)', without '\(plain.text)'")
            let s = fast.stats.speculation
            try expect(s.verifySteps > 0 && s.acceptedTokens > 0 && s.calibratedPositions > 0, "\(s)")
            try expect(s.tokensPerStep > 1 && s.acceptanceRate > 0 && s.acceptanceRate <= 1, "\(s)")
            try expect(s.draftLengths.count <= 17, "drafts over 16 tokens: \(s)")
            // A single chain without calibration: the same answer again.
            let chain = try await answer(
                engine,
                SpeculationOptions(
                    mode: .limits(limits: DraftLimits(maxDraftTokens: 8, maxWidth: 1, adaptive: false)),
                    calibrationPositions: 0),
                summary)
            try expect(chain.text == plain.text, "as a chain '\(chain.text)'")
            try expect(chain.stats.speculation.calibratedPositions == 0, "calibrated \(chain.stats.speculation)")
        }

        await test("bad speculation options raise InvalidOption") {
            let none = SpeculationOptions(mode: .limits(limits: DraftLimits(maxDraftTokens: 0)))
            try await expectThrows("maxDraftTokens 0", { try engine.newSession(options: SessionOptions(sampling: greedy, speculation: none)) }) {
                if case .InvalidOption? = ternError($0) { return true }
                return false
            }
            let dir = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            try await expectThrows("a zero cap", { try HistoryStore.open(dir: dir.path, options: HistoryOptions(maxBytesPerKey: 0)) }) {
                if case .InvalidOption? = ternError($0) { return true }
                return false
            }
            let store = try HistoryStore.open(dir: dir.path)
            try await expectThrows("an empty key", { try store.add(key: "", text: "text") }) {
                if case .InvalidOption? = ternError($0) { return true }
                return false
            }
        }

        await test("docs/ios.md speculation sample runs and stores the thread") {
            let dir = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let history = try openHistory(appSupport: dir)
            let message = "Are we still on for dinner at the Italian place on Friday at eight?"
            let reply = try await suggestReply(engine: engine, history: history, contact: "alice", message: message)
            try expect(!reply.text.isEmpty, "no reply")
            let stored = try history.texts(key: "alice")
            try expect(stored == [message, reply.text], "stored \(stored)")
            try expect(reply.stats.speculation.historyError == nil, "\(reply.stats.speculation)")
        }

        await test("a HistoryStore keyed by contact feeds a later session; clearing it forgets") {
            let dir = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(at: dir) }
            let history = try HistoryStore.open(dir: dir.path)
            let scope = HistoryScope(store: history, key: "contact-7")
            let question = "Write a short poem about the sea and the wind at night."
            let first = try await answer(engine, SpeculationOptions(mode: always, history: scope), question)
            let stored = try history.texts(key: "contact-7")
            try expect(stored == [first.text], "stored \(stored)")
            // The same request again: its answer is in the scope now, so drafts come from it.
            let again = try await answer(engine, SpeculationOptions(mode: always, history: scope), question)
            let without = try await answer(engine, SpeculationOptions(mode: always), question)
            try expect(again.text == first.text && without.text == first.text, "'\(again.text)' vs '\(first.text)'")
            let (a, b) = (without.stats.speculation, again.stats.speculation)
            try expect(b.acceptedTokens > a.acceptedTokens + 10, "without history \(a), with \(b)")
            try history.add(key: "contact-8", text: "See you tomorrow.")
            try history.clear(key: "contact-7")
            try expect(try history.texts(key: "contact-7").isEmpty, "the key kept its texts")
            try expect(try history.texts(key: "contact-8") == ["See you tomorrow."], "another key lost its texts")
            let readOnly = HistoryScope(store: history, key: "contact-7", recordAnswers: false)
            let cleared = try await answer(engine, SpeculationOptions(mode: always, history: readOnly), question)
            try expect(cleared.stats.speculation.acceptedTokens < b.acceptedTokens, "after clear \(cleared.stats.speculation)")
            try expect(try history.texts(key: "contact-7").isEmpty, "recordAnswers: false stored an answer")
            try expect(try history.totalBytes() > 0, "the other key's text is on disk")
            try history.clearAll()
            try expect(try history.totalBytes() == 0, "clearAll left bytes on disk")
            try expect(try history.texts(key: "contact-8").isEmpty, "clearAll left texts")
        }
    }
}
