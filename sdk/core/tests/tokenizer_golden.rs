//! Tokenizer against llama.cpp's outputs on the three reference models: the golden files'
//! plain and special-token encodings, chat and completion prompts and detokenized greedy
//! continuations (`golden/<model>.json`); hard texts, end-of-generation and control ids and the
//! bytes of every token (`golden/tokenizer_cases.json`); streaming decoding of multi-byte
//! characters; load time.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;
use tern::gguf::GgufFile;
use tern::tokenizer::Tokenizer;

const SMOLLM2: (&str, &str) = ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct-q4_1");
const QWEN2: (&str, &str) = ("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m");
const GEMMA3: (&str, &str) = ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m-q4_k_m");

fn model_path(file: &str) -> PathBuf {
    let dir = match std::env::var_os("TERN_MODEL_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
            home.join(".cache/tern/models")
        }
    };
    let p = dir.join(file);
    assert!(p.exists(), "{} is missing: run `cargo xtask models --all` first", p.display());
    p
}

fn golden(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden JSON parses")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().expect("array of ids").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

fn load((file, _): (&str, &str)) -> Tokenizer {
    let gguf = GgufFile::open(model_path(file)).expect("model opens");
    let t0 = Instant::now();
    let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer loads");
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    eprintln!("{file}: tokenizer loaded in {ms:.1} ms ({} tokens)", tok.vocab_size());
    tok
}

/// Every case of the model's golden file; all mismatches are reported together.
fn check_golden(model: (&str, &str)) {
    let tok = load(model);
    let g = golden(model.1);
    let mut failures = Vec::new();
    let mut n_checks = 0;
    let mut check = |what: String, got: Vec<u32>, want: Vec<u32>| {
        n_checks += 1;
        if got != want {
            failures.push(format!("{what}\n   got  {got:?}\n   want {want:?}"));
        }
    };

    for case in g["tokenize"].as_array().expect("tokenize cases") {
        let text = case["text"].as_str().expect("text");
        let add_bos = case["add_bos"].as_bool().expect("add_bos");
        check(format!("encode({text:?}, special=false)"), tok.encode(text, add_bos, false).unwrap(), ids(&case["ids"]));
        check(
            format!("encode({text:?}, special=true)"),
            tok.encode(text, add_bos, true).unwrap(),
            ids(&case["ids_parse_special"]),
        );
        assert_eq!(add_bos, tok.add_bos_default(), "the golden add_bos is the model's rule");
    }
    for case in g["chat"].as_array().expect("chat cases") {
        let rendered = case["rendered"].as_str().expect("rendered");
        check(
            format!("chat prompt {rendered:?}"),
            tok.encode(rendered, tok.add_bos_default(), true).unwrap(),
            ids(&case["prompt_ids"]),
        );
    }
    for case in g["completions"].as_array().expect("completion cases") {
        let prompt = case["prompt"].as_str().expect("prompt");
        for special in [false, true] {
            check(
                format!("completion prompt {prompt:?} (special={special})"),
                tok.encode(prompt, tok.add_bos_default(), special).unwrap(),
                ids(&case["prompt_ids"]),
            );
        }
    }

    // greedy_text is the detokenized continuation: control tokens (the closing EOG) print nothing.
    let mut n_text = 0;
    for case in g["chat"].as_array().into_iter().flatten().chain(g["completions"].as_array().into_iter().flatten()) {
        let Some(want) = case["greedy_text"].as_str() else { continue };
        n_text += 1;
        let greedy = ids(&case["greedy"]);
        let got = tok.decode(&greedy, true);
        if got != want {
            failures.push(format!("decode({greedy:?})\n   got  {got:?}\n   want {want:?}"));
        }
        // The same text streamed token by token.
        let mut dec = tok.stream_decoder(true);
        let mut streamed: String = greedy.iter().map(|&id| dec.push(id)).collect();
        streamed.push_str(&dec.finish());
        if streamed != got {
            failures.push(format!("streamed {greedy:?}\n   got  {streamed:?}\n   want {got:?}"));
        }
    }
    eprintln!("{}: {n_checks} encodings, {n_text} decodings checked", model.0);
    assert!(failures.is_empty(), "{} of {} mismatches:\n{}", failures.len(), n_checks, failures.join("\n"));
}

#[test]
fn smollm2_matches_llama_cpp() {
    check_golden(SMOLLM2);
}

#[test]
fn qwen2_matches_llama_cpp() {
    check_golden(QWEN2);
}

#[test]
fn gemma3_matches_llama_cpp() {
    check_golden(GEMMA3);
}

/// `golden/tokenizer_cases.json` (written by `golden/tokenizer_cases.py`): llama.cpp's ids for
/// hard texts, its end-of-generation and control ids, and a digest of every token's bytes.
fn check_cases(model: (&str, &str)) {
    let tok = load(model);
    let g = golden("tokenizer_cases");
    let m = &g["models"][model.1];
    assert_eq!(tok.eog_ids(), ids(&m["eog"]).as_slice(), "end-of-generation ids");

    let mut control: Vec<[u32; 2]> = Vec::new();
    for id in (0..tok.vocab_size() as u32).filter(|&id| tok.is_control(id)) {
        match control.last_mut() {
            Some([_, last]) if *last + 1 == id => *last = id,
            _ => control.push([id, id]),
        }
    }
    let want: Vec<[u32; 2]> = m["control_ranges"]
        .as_array()
        .expect("ranges")
        .iter()
        .map(|r| {
            let r = ids(r);
            [r[0], r[1]]
        })
        .collect();
    assert_eq!(control, want, "control ids");

    // FNV-1a 64 over (u32 LE length, bytes) of each token's piece, special off then on.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for special in [false, true] {
        for id in 0..tok.vocab_size() as u32 {
            let piece = tok.token_to_bytes(id, special);
            for &b in (piece.len() as u32).to_le_bytes().iter().chain(&piece) {
                h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
        }
    }
    assert_eq!(format!("{h:016x}"), m["piece_digest"].as_str().expect("digest"), "decoded bytes of the vocabulary");

    let texts = g["texts"].as_array().expect("texts");
    let mut failures = Vec::new();
    for (key, special) in [("ids", false), ("ids_parse_special", true)] {
        for (text, want) in texts.iter().zip(m[key].as_array().expect("ids")) {
            let text = text.as_str().expect("text");
            let got = tok.encode(text, tok.add_bos_default(), special).unwrap();
            if got != ids(want) {
                failures.push(format!("encode({text:?}, special={special})\n   got  {got:?}\n   want {:?}", ids(want)));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn smollm2_hard_cases() {
    check_cases(SMOLLM2);
}

#[test]
fn qwen2_hard_cases() {
    check_cases(QWEN2);
}

#[test]
fn gemma3_hard_cases() {
    check_cases(GEMMA3);
}

/// Feeding ids one at a time: every chunk is whole characters, nothing is lost, and characters
/// split over several tokens are held back until complete.
fn check_streaming(model: (&str, &str)) {
    let tok = load(model);
    let texts = [
        "emoji 🎉🚀 and ZWJ 👩‍💻",
        "東京は日本の首都です。",
        "naïve café résumé Zürich São Paulo",
        "Привет, как дела? 😀👍🏽 ∑∫√ 한국어 ไทย",
    ];
    let mut held_back = 0;
    for text in texts {
        let ids = tok.encode(text, false, false).unwrap();
        let mut dec = tok.stream_decoder(true);
        let mut all = String::new();
        for &id in &ids {
            let chunk = dec.push(id);
            assert!(!chunk.contains('\u{FFFD}'), "{}: chunk {chunk:?} of {text:?} is not whole characters", model.0);
            if chunk.is_empty() && !tok.token_to_bytes(id, false).is_empty() {
                held_back += 1;
            }
            all.push_str(&chunk);
        }
        assert_eq!(dec.finish(), "");
        assert_eq!(all, tok.decode(&ids, true));
        assert_eq!(all, text, "{}: round trip", model.0);
    }
    eprintln!("{}: {held_back} tokens held back mid-character", model.0);

    // A stream cut inside a character ends with one replacement character.
    let ids = tok.encode("🎉", false, false).unwrap();
    if ids.len() > 1 {
        let mut dec = tok.stream_decoder(true);
        let head: String = ids[..ids.len() - 1].iter().map(|&id| dec.push(id)).collect();
        assert_eq!(head, "");
        assert_eq!(dec.finish(), "\u{FFFD}");
    }
}

#[test]
fn streaming_smollm2() {
    check_streaming(SMOLLM2);
}

#[test]
fn streaming_qwen2() {
    check_streaming(QWEN2);
}

#[test]
fn streaming_gemma3() {
    check_streaming(GEMMA3);
}

/// Special-token ids and end-of-generation sets as llama.cpp reports them.
#[test]
fn special_tokens() {
    let smol = load(SMOLLM2);
    assert_eq!(smol.bos_id(), Some(1));
    assert_eq!(smol.eos_id(), Some(2));
    assert!(!smol.add_bos_default());
    assert_eq!(smol.token_id("<|im_end|>"), Some(2));
    assert!(smol.is_eog(2) && smol.is_eog(0));
    assert!(smol.is_control(1));
    assert_eq!(smol.decode(&[1, 19556, 2], false), "<|im_start|>Hello<|im_end|>");
    assert_eq!(smol.decode(&[1, 19556, 2], true), "Hello");

    let qwen = load(QWEN2);
    let im_end = qwen.token_id("<|im_end|>").unwrap();
    let eot = qwen.token_id("<|endoftext|>").unwrap();
    assert_eq!((im_end, eot), (151645, 151643));
    assert!(qwen.is_eog(im_end) && qwen.is_eog(eot));
    assert!(!qwen.is_eog(qwen.token_id("<|im_start|>").unwrap()));

    let gemma = load(GEMMA3);
    assert_eq!(gemma.bos_id(), Some(2));
    assert_eq!(gemma.eos_id(), Some(1));
    assert!(gemma.add_bos_default());
    let eot = gemma.token_id("<end_of_turn>").unwrap();
    assert_eq!(eot, 106);
    assert!(gemma.is_eog(1) && gemma.is_eog(eot));
    assert_eq!(gemma.token_text(2), Some("<bos>"));
}

/// Load time, best of several runs (the first also pays for paging in the metadata). The
/// SDK's budget from file to first token is 100 ms for SmolLM2; the tokenizer takes a part.
#[test]
fn load_time() {
    for (file, _) in [SMOLLM2, QWEN2, GEMMA3] {
        let gguf = GgufFile::open(model_path(file)).expect("model opens");
        let mut times = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer loads");
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            drop(tok);
        }
        let first = times[0];
        times.sort_by(|a, b| a.total_cmp(b));
        eprintln!("{file}: tokenizer load first {first:.1} ms, best {:.1} ms, median {:.1} ms", times[0], times[2]);
        if file == SMOLLM2.0 {
            assert!(times[0] < 100.0, "SmolLM2 tokenizer takes {:.1} ms to load", times[0]);
        }
    }
}
