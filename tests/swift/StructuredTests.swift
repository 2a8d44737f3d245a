// Structured output, the model store and energy through the Swift package, run by main.swift's
// suite on the same engine (SmolLM2-135M, greedy).

import Foundation
import Tern
#if canImport(Glibc)
import Glibc
#endif

/// An input shared with the Kotlin suite (tests/bindings/), beside the prompts file.
func fixture(_ name: String) -> String {
    let dir = URL(fileURLWithPath: CommandLine.arguments[2]).deletingLastPathComponent()
    guard let text = try? String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8) else {
        fatalError("missing test input \(name) beside the prompts file")
    }
    return text
}

/// A screen of the `ui` dev workloads (dev-ui-0).
let messagesScreen = fixture("ui-screen.json")

let tripSchema = fixture("trip-schema.json")

let weatherTool = Tool(name: "get_weather", description: "Current weather in a city", parameters: fixture("weather-parameters.json"))

/// The JSON object `text` holds, or a failure.
func jsonObject(_ text: String) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
        throw Failure(description: "not a JSON object: '\(text)'")
    }
    return object
}

/// The trip of trip-schema.json as the app's type.
struct Trip: Generable {
    let city: String
    let days: Int
    static let jsonSchema = tripSchema
}

/// What a tool handler saw, across its calls.
actor Calls {
    private(set) var all: [String] = []
    func add(_ arguments: String) { all.append(arguments) }
}

/// The states a session reported, in order.
actor Flags {
    private(set) var all: [Bool] = []
    func add(_ busy: Bool) { all.append(busy) }
}

func ternError(_ error: Error) -> TernError? {
    error as? TernError
}

extension Suite {
    func structuredTests(engine: Engine) async {
        await test("a JSON Schema answer streams as it grows and parses to the schema") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 64))
            try await session.setGrammar(grammar: .jsonSchema(schema: tripSchema))
            var pieces: [String] = []
            for try await piece in session.stream("Plan a trip to Lyon.").textPieces { pieces.append(piece) }
            let text = pieces.joined()
            try expect(pieces.filter { !$0.isEmpty }.count > 1, "the JSON came in one piece: \(pieces)")
            let value = try jsonObject(text)
            try expect(Set(value.keys) == ["city", "days"], "keys of '\(text)'")
            try expect(value["city"] is String, "city in '\(text)'")
            let days = (value["days"] as? Int) ?? (value["days"] as? NSNumber)?.intValue ?? 0
            try expect((1...30).contains(days), "days in '\(text)'")
            let stats = session.lastStats()
            try expect(stats?.finishReason == .endOfGeneration, "finish \(String(describing: stats?.finishReason))")
            try expect((stats?.constraintMs ?? 0) > 0, "no constraint time")
            try await session.setGrammar(grammar: nil)
            try expect(try await session.reply("Thanks!").stats.constraintMs == 0, "constrained after setGrammar(nil)")
        }

        await test("a schema the library cannot use throws Grammar before generating") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 8))
            try await expectThrows("schema", { try await session.setGrammar(grammar: .jsonSchema(schema: #"{"type": "no-such-type"}"#)) }) {
                if case .Grammar? = ternError($0) { return true }
                return false
            }
            try expect(session.tokenCount() == 0, "something was generated")
            try expect(try await session.reply("Hello").stats.generatedTokens > 0, "no answer")
        }

        await test("a required tool call arrives as .toolCall, and the tool's result is answered") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 64))
            try await session.setTools(tools: [weatherTool], choice: .required)
            var events: [TokenEvent] = []
            for try await event in session.stream("What is the weather in Paris?") { events.append(event) }
            let calls = events.compactMap { if case .toolCall(let call) = $0 { return call } else { return nil } }
            guard calls.count == 1, let call = calls.first else { throw Failure(description: "calls in \(events)") }
            guard case .done = events.last else { throw Failure(description: ".toolCall is not followed by .done") }
            try expect(call.name == "get_weather", "called \(call.name)")
            let args = try jsonObject(call.arguments)
            try expect(Set(args.keys) == ["city"] && args["city"] is String, "arguments '\(call.arguments)'")
            let answer = try await session.replyToolResult(#"{"temperature_c": 18, "sky": "cloudy"}"#)
            try expect(answer.stats.generatedTokens > 0, "no answer to the tool's result")
            try expect(answer.stats.cachedTokens > 0, "the conversation's cache was not reused")
        }

        await test("generate returns the app's own Decodable type") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 64))
            let trip = try await session.generate("Plan a trip to Lyon.", as: Trip.self)
            try expect(!trip.city.isEmpty && (1...30).contains(trip.days), "\(trip)")
            try expect(session.messages().count == 2, "the turn is not in the conversation")
            let short = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 3))
            try await expectThrows("cut off", { _ = try await short.generate("Plan a trip to Lyon.", as: Trip.self) }) {
                if case .Constraint? = ternError($0) { return true }
                return false
            }
        }

        await test("the tool loop calls the registered handler and answers after its result") {
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 48))
            let seen = Calls()
            let weather = ToolHandler(weatherTool) { arguments in
                await seen.add(arguments)
                return #"{"temperature_c": 18, "sky": "cloudy"}"#
            }
            let done = try await session.reply("What is the weather in Paris?", using: [weather], choice: .required, maxCalls: 1)
            let arguments = await seen.all
            try expect(arguments.count == 1 && done.calls.count == 1, "calls \(arguments)")
            try expect(try jsonObject(arguments[0])["city"] is String, "arguments \(arguments)")
            try expect(done.reply.toolCall == nil && !done.reply.text.isEmpty, "answer '\(done.reply.text)'")
            let roles = session.messages().map(\.role)
            try expect(roles == [.user, .assistant, .tool, .assistant], "roles \(roles)")
            try expect(session.messages()[2].content == #"{"temperature_c": 18, "sky": "cloudy"}"#, "the result is not in the conversation")
        }

        await test("a UI action names an element of its screen") {
            let screen = try screenFromJson(json: messagesScreen)
            let session = try engine.newSession(options: SessionOptions(systemPrompt: uiSystemPrompt(), sampling: greedy, maxTokens: 96))
            let action = try await session.action(on: screen, goal: "Reply to Alice's message")
            try validateUiAction(screen: screen, action: action)
            let ids = screen.elements.map(\.id)
            try expect(action.action == .back || action.id.map(ids.contains) == true, "action \(action)")
            try expect((session.lastStats()?.constraintMs ?? 0) > 0, "the answer was not constrained")
        }

        await test("UI actions from elsewhere are checked against the screen") {
            let screen = try screenFromJson(json: messagesScreen)
            let tap = try parseUiAction(screen: screen, text: #"I will open it: {"action": "tap", "id": 2}"#)
            try expect(tap == UiAction(action: .tap, id: 2), "parsed \(tap)")
            try await expectThrows("unknown id", { try validateUiAction(screen: screen, action: UiAction(action: .tap, id: 9)) }) {
                if case .InvalidAction? = ternError($0) { return true }
                return false
            }
        }

        await test("cancelling the Task awaiting a UI action stops its generation") {
            let screen = try screenFromJson(json: messagesScreen)
            let session = try engine.newSession(options: SessionOptions(systemPrompt: uiSystemPrompt(), sampling: greedy, maxTokens: 96))
            let task = Task { try await session.action(on: screen, goal: "Reply to Alice's message") }
            while !session.isBusy() { try await Task.sleep(for: .milliseconds(1)) }
            try await Task.sleep(for: .milliseconds(20))
            task.cancel()
            // Still in the prompt, the answer stops at the end of the current prefill chunk
            // (seconds on a busy machine), so no 200 ms bound here.
            let result = await task.result
            guard case .failure(let error) = result, case .Cancelled? = ternError(error) else {
                throw Failure(description: "result \(result)")
            }
            try expect(session.lastStats()?.finishReason == .cancelled, "not cancelled")
        }
    }

    func docSampleTests(engine: Engine, model: String) async {
        await test("docs/ios.md structured output samples run") {
            let trip = try jsonObject(try await planTrip(engine: engine))
            try expect(Set(trip.keys) == ["city", "days"], "trip \(trip)")
            let session = try engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 64))
            _ = try await askWithTools(session: session, question: "What is the weather in Paris?") { arguments in
                guard (try? jsonObject(arguments))?["city"] != nil else { throw Failure(description: "arguments \(arguments)") }
                return #"{"temperature_c": 18}"#
            }
            let plan = try await planTypedTrip(engine: engine)
            try expect(!plan.city.isEmpty && plan.days >= 1, "plan \(plan)")
            let action = try await nextStep(engine: engine, screenJson: messagesScreen, goal: "Reply to Alice's message")
            try validateUiAction(screen: try screenFromJson(json: messagesScreen), action: action)
        }

        await test("docs/ios.md download and energy samples run") {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-docs-\(getpid())")
            defer { try? FileManager.default.removeItem(at: dir) }
            // The real SmolLM2 file, served on loopback: its size and hash are the manifest's.
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: model)))
            let server = try ModelServer(body: bytes)
            defer { server.stop() }
            var progress = 0.0
            let path = try await downloadModel(appSupport: dir, url: server.url) { progress = $0 }
            try expect(progress == 1, "progress ended at \(progress)")
            let loaded = try await Engine.load(path: path, options: EngineOptions(threads: threads))
            try expect(loaded.info().nParams > 0, "loaded \(loaded.info())")
            try expect(try await downloadModel(appSupport: dir, url: server.url) { _ in } == path && server.ranges.count == 1, "downloaded twice")
            let tuned = try await loadTuned(path: model, appSupport: dir, deviceModel: "docs-sample")
            try expect(tuned.energyTuning() != nil, "not tuned")
            tuned.report(thermalState: .critical)
            try expect(tuned.energyStatus().effectiveMode == .powerSaver, "status \(tuned.energyStatus())")
        }
    }

    func storeTests() async {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-store-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        var generator = SeededBytes(seed: 7)
        let body = (0..<(3 * 1024 * 1024 + 123)).map { _ in generator.next() }
        let quick = DownloadOptions(retries: 3, retryDelayMs: 10, stallTimeoutMs: 5000, connectTimeoutMs: 5000)
        let store: ModelStore
        let spec: ModelSpec
        do {
            store = try ModelStore.open(dir: dir.path)
            spec = ModelSpec(name: "test", fileName: "test-model.gguf", size: UInt64(body.count), sha256: try sha256(body))
        } catch {
            failed += 1
            print("FAIL open the store: \(error)")
            return
        }

        await test("a download reports its progress and installs the verified file") {
            let server = try ModelServer(body: body)
            defer { server.stop() }
            var events: [DownloadEvent] = []
            for try await event in store.download(spec, from: server.url, options: quick) { events.append(event) }
            try expect(events.first == .started(from: 0, total: UInt64(body.count)), "first event \(events)")
            let progress = events.compactMap { if case .progress(let n, _) = $0 { return n } else { return nil } }
            try expect(progress.count >= 3 && progress == progress.sorted() && progress.last == UInt64(body.count), "progress \(progress)")
            try expect(events[events.count - 2] == .verifying, "events \(events)")
            guard case .done(let path) = events.last else { throw Failure(description: "last \(events)") }
            try expect(FileManager.default.contents(atPath: path) == Data(body), "the file differs")
            try expect(store.installed(spec: spec) == path, "installed")
            try expect(try store.list() == [StoredFile(fileName: "test-model.gguf", size: UInt64(body.count), complete: true)], "list")
            try expect(try await store.fetch(spec, from: server.url, options: quick) == path && server.ranges.count == 1, "downloaded again")
            try expect(try store.delete(spec: spec) && store.installed(spec: spec) == nil, "not deleted")
        }

        await test("a dropped connection is resumed with a range and the file has the right hash") {
            let server = try ModelServer(body: body, dropFirstAt: body.count / 2)
            defer { server.stop() }
            var last: UInt64 = 0
            let path = try await store.fetch(spec, from: server.url, options: quick) { downloaded, _ in last = downloaded }
            try expect(server.ranges.count == 2 && server.ranges[1]?.hasPrefix("bytes=") == true, "requests \(server.ranges)")
            try expect(last == UInt64(body.count), "progress ended at \(last)")
            try expect(FileManager.default.contents(atPath: path) == Data(body), "wrong bytes")
            _ = try store.delete(spec: spec)
        }

        await test("a corrupted byte throws HashMismatch and nothing is installed") {
            var corrupt = body
            corrupt[body.count / 3] &+= 1
            let server = try ModelServer(body: corrupt)
            defer { server.stop() }
            let actual = try sha256(corrupt)
            try await expectThrows("corrupt", { try await store.fetch(spec, from: server.url, options: quick) }) {
                if case .HashMismatch(let want, let got)? = ternError($0) { return want == spec.sha256 && got == actual }
                return false
            }
            let left = try store.list()
            try expect(store.installed(spec: spec) == nil && left.isEmpty, "left \(left)")
        }

        await test("leaving the loop cancels the download and keeps the partial file for a resume") {
            let server = try ModelServer(body: body, stallFirstAt: 2 * 1024 * 1024)
            defer { server.stop() }
            for try await event in store.download(spec, from: server.url, options: quick) {
                if case .progress = event { break }
            }
            let partial = try store.list()
            try expect(partial.count == 1 && !partial[0].complete, "list \(partial)")
            // The download thread lets go of the file at its next read (the server pauses for a
            // second); until then the same model is DownloadInProgress.
            let clock = ContinuousClock()
            let start = clock.now
            var resumed: String?
            while resumed == nil {
                do {
                    resumed = try await store.fetch(spec, from: server.url, options: quick)
                } catch TernError.DownloadInProgress {
                    try expect(clock.now - start < .seconds(5), "the cancelled download still holds the file")
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            try expect(server.ranges.last??.hasPrefix("bytes=") == true, "not resumed: \(server.ranges)")
            try expect(FileManager.default.contents(atPath: resumed!) == Data(body), "wrong bytes")
            _ = try store.delete(spec: spec)
        }
    }

    func energyTests(model: String) async {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("tern-energy-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        let energy = EnergyOptions(tuningDir: dir.path, deviceName: "swift-suite")

        await test("energy mode set and get; a throttled device decodes in power saver") {
            let engine = try await Engine.load(path: model, options: EngineOptions(threads: threads, energy: energy))
            let status = engine.energyStatus()
            try expect(status.mode == .balanced && status.effectiveMode == .balanced && !status.tuned, "status \(status)")
            try engine.setEnergyMode(mode: .performance)
            try expect(engine.energyStatus().mode == .performance, "mode \(engine.energyStatus().mode)")
            engine.report(thermalState: .serious)
            try expect(engine.energyStatus().effectiveMode == .powerSaver, "throttled \(engine.energyStatus())")
            engine.report(thermalState: .nominal, batteryLow: true)
            try expect(engine.energyStatus().effectiveMode == .powerSaver, "battery low \(engine.energyStatus())")
            engine.report(thermalState: .fair)
            try expect(engine.energyStatus().effectiveMode == .performance, "cleared \(engine.energyStatus())")
            try engine.setEnergyMode(mode: .custom(prefill: .threads(count: 1), decode: .threads(count: 1)))
            let missing = EnergyMode.custom(prefill: .cores(ids: [99999]), decode: .threads(count: 1))
            try await expectThrows("a core the device lacks", { try engine.setEnergyMode(mode: missing) }) {
                if case .InvalidOption? = ternError($0) { return true }
                return false
            }
            try expect(engine.energyStatus().mode == .custom(prefill: .threads(count: 1), decode: .threads(count: 1)), "a refused mode changed it: \(engine.energyStatus().mode)")
            let stats = try await engine.newSession(options: SessionOptions(sampling: greedy, maxTokens: 8, ignoreEos: true)).reply("Hello").stats
            try expect(stats.energy.decode.selection == .threads(count: 1), "decoded on \(String(describing: stats.energy.decode.selection))")
            try expect((stats.energy.decode.joulesPerToken ?? 0) > 0, "decode energy \(stats.energy.decode)")
        }

        await test("tuning finds decode selections and stores them; a new engine reuses them") {
            let engine = try await Engine.load(path: model, options: EngineOptions(energy: energy))
            try expect(engine.energyTuning() == nil, "tuned before tuning")
            let tuning = try await engine.tuneEnergy()
            try expect(tuning.probes > 0 && tuning.balanced.tokensPerS > 0, "tuning \(tuning)")
            try expect(engine.energyTuning() == tuning && engine.energyStatus().decode == tuning.balanced.selection, "not applied")
            let again = try await Engine.load(path: model, options: EngineOptions(energy: energy))
            let reused = again.energyTuning()
            try expect(reused?.balanced.selection == tuning.balanced.selection && reused?.tunedAt == tuning.tunedAt, "reused \(String(describing: reused))")
        }
    }
}

/// Deterministic test bytes (SplitMix64).
struct SeededBytes {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt8 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return UInt8(truncatingIfNeeded: z ^ (z >> 31))
    }
}

/// SHA-256 of `bytes` as hex, from coreutils' sha256sum (Foundation on Linux has no digest).
func sha256(_ bytes: [UInt8]) throws -> String {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("tern-sha-\(getpid())")
    defer { try? FileManager.default.removeItem(at: file) }
    try Data(bytes).write(to: file)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [file.path]
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self).split(separator: " ").first.map(String.init) ?? ""
}

/// An HTTP/1.1 server on 127.0.0.1 that serves `body` at /model.gguf, with ranges (anything
/// else is 404), one connection at a time. Its first response can break off after
/// `dropFirstAt` bytes (the connection drops), or pause for a second after `stallFirstAt` bytes.
final class ModelServer: @unchecked Sendable {
    private let body: [UInt8]
    private let dropFirstAt: Int?
    private let stallFirstAt: Int?
    private let listener: Int32
    private let lock = NSLock()
    private var seen: [String?] = []
    let port: UInt16

    var url: String { "http://127.0.0.1:\(port)/model.gguf" }
    /// The Range header of each request so far.
    var ranges: [String?] { lock.withLock { seen } }

    init(body: [UInt8], dropFirstAt: Int? = nil, stallFirstAt: Int? = nil) throws {
        self.body = body
        self.dropFirstAt = dropFirstAt
        self.stallFirstAt = stallFirstAt
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, len) == 0 && listen(fd, 8) == 0 && getsockname(fd, sa, &len) == 0
            }
        }
        guard fd >= 0, bound else { throw Failure(description: "cannot listen on 127.0.0.1") }
        listener = fd
        port = UInt16(bigEndian: addr.sin_port)
        Thread.detachNewThread { [self] in serve() }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve() {
        while true {
            let conn = accept(listener, nil, nil)
            if conn < 0 { return }
            respond(conn)
            close(conn)
        }
    }

    private func respond(_ conn: Int32) {
        var request = [UInt8]()
        let size = 4096
        var buf = [UInt8](repeating: 0, count: size)
        while !request.ends(with: Array("\r\n\r\n".utf8)) {
            let n = read(conn, &buf, size)
            if n <= 0 { return }
            request += buf[0..<n]
        }
        let lines = String(decoding: request, as: UTF8.self).components(separatedBy: "\r\n")
        let path = lines[0].split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let range = lines.first { $0.lowercased().hasPrefix("range:") }.map {
            $0.dropFirst("range:".count).trimmingCharacters(in: .whitespaces)
        }
        let first = lock.withLock { seen.append(range); return seen.count == 1 }
        guard path == "/model.gguf" else {
            _ = send(conn, Array("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            return
        }
        let from = range.flatMap { Int($0.dropFirst("bytes=".count).dropLast()) } ?? 0
        var head = range == nil
            ? "HTTP/1.1 200 OK\r\n"
            : "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes \(from)-\(body.count - 1)/\(body.count)\r\n"
        head += "Content-Length: \(body.count - from)\r\nConnection: close\r\n\r\n"
        guard send(conn, Array(head.utf8)) else { return }
        var start = from
        if first, let stall = stallFirstAt, stall > from {
            guard send(conn, Array(body[from..<stall])) else { return }
            Thread.sleep(forTimeInterval: 1)
            start = stall
        }
        let end = first ? dropFirstAt ?? body.count : body.count
        _ = send(conn, Array(body[start..<end]))
    }

    /// Writes all of `bytes`; false when the client went away.
    private func send(_ conn: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(conn, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }
}

extension Array where Element: Equatable {
    func ends(with suffix: [Element]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
