//! Tokenizers of the vocabularies the supported model families ship, against llama.cpp's own
//! tokenizer tests: `vocab/ggml-vocab-<name>.gguf.gz` is a vocabulary-only GGUF (gzip-compressed
//! here), `.inp` the test strings, separated by `\n__ggml_vocab_test__\n`, and `.out` one line
//! of expected ids per string (llama.cpp's `test-tokenizer-0`: no BOS/EOS, special-token text
//! treated as plain text).

use std::io::Read;
use std::path::PathBuf;

use tern::gguf::GgufFile;
use tern::tokenizer::Tokenizer;

/// Every vocabulary of `tests/vocab/`.
const VOCABS: &[&str] = &["llama-bpe", "qwen2", "qwen35", "phi-3", "llama-spm", "gpt-2", "gemma-4"];

const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

fn vocab_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vocab")
}

fn load(name: &str) -> tern::Result<Tokenizer> {
    let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf.gz"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(file).read_to_end(&mut bytes).expect("vocabulary decompresses");
    let gguf = GgufFile::from_bytes(bytes).expect("vocabulary GGUF parses");
    Tokenizer::from_gguf(&gguf)
}

/// The test strings and their expected ids.
fn cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let read = |ext: &str| {
        let path = vocab_dir().join(format!("ggml-vocab-{name}.gguf.{ext}"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let inp = read("inp");
    let out = read("out");
    let mut texts: Vec<&str> = inp.split(SEPARATOR).collect();
    // Most files end with a separator: the empty piece after it is not a case.
    if texts.last() == Some(&"") {
        texts.pop();
    }
    let ids: Vec<Vec<u32>> =
        out.lines().map(|line| line.split_whitespace().map(|t| t.parse().expect("token id")).collect()).collect();
    assert_eq!(texts.len(), ids.len(), "{name}: as many expected lines as strings");
    texts.into_iter().map(str::to_owned).zip(ids).collect()
}

#[test]
fn every_case_matches_llama_cpp() {
    let mut failures = Vec::new();
    let mut total = 0;
    for &name in VOCABS {
        let tok = match load(name) {
            Ok(tok) => tok,
            Err(e) => {
                failures.push(format!("{name}: the tokenizer does not load: {e}"));
                continue;
            }
        };
        for (text, want) in cases(name) {
            total += 1;
            let got = tok.encode(&text, false, false).expect("encodes");
            if got != want {
                failures.push(format!("{name}: {text:?}\n   got  {got:?}\n   want {want:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {total} cases differ:\n{}", failures.len(), failures.join("\n"));
    eprintln!("{total} cases over {} vocabularies match", VOCABS.len());
}

/// Phi-3's special tokens drop the whitespace after them, as its Hugging Face tokenizer does
/// (`rstrip`), which llama.cpp reproduces by the model's name: chat markup such as
/// `<|user|>\n` encodes as `<|user|>` alone.
#[test]
fn phi3_special_tokens_strip_whitespace_after_them() {
    let tok = load("phi-3").expect("phi-3 loads");
    let spaced = tok.encode("<|user|>\nHello<|end|>\n<|assistant|>", false, true).expect("encodes");
    let tight = tok.encode("<|user|>Hello<|end|><|assistant|>", false, true).expect("encodes");
    assert_eq!(spaced, tight);
    let user = tok.token_id("<|user|>").expect("<|user|> is a token");
    assert_eq!(spaced.first(), Some(&user));
    // `<s>` keeps what follows.
    let bos = tok.encode("<s>\nHello", false, true).expect("encodes");
    assert_ne!(bos, tok.encode("<s>Hello", false, true).expect("encodes"));
}
