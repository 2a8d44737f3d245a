//! Unit tests on small vocabularies written as in-memory GGUF files.

use super::*;

enum Meta<'a> {
    Str(&'a str),
    U32(u32),
    Bool(bool),
    Strs(Vec<String>),
    F32s(Vec<f32>),
    I32s(Vec<i32>),
}

fn gguf(kvs: Vec<(&str, Meta<'_>)>) -> GgufFile {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (key, v) in kvs {
        string(&mut out, key);
        match v {
            Meta::Str(s) => {
                out.extend_from_slice(&8u32.to_le_bytes());
                string(&mut out, s);
            }
            Meta::U32(x) => {
                out.extend_from_slice(&4u32.to_le_bytes());
                out.extend_from_slice(&x.to_le_bytes());
            }
            Meta::Bool(b) => {
                out.extend_from_slice(&7u32.to_le_bytes());
                out.push(b as u8);
            }
            Meta::Strs(v) => {
                out.extend_from_slice(&9u32.to_le_bytes());
                out.extend_from_slice(&8u32.to_le_bytes());
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                for s in &v {
                    string(&mut out, s);
                }
            }
            Meta::F32s(v) => {
                out.extend_from_slice(&9u32.to_le_bytes());
                out.extend_from_slice(&6u32.to_le_bytes());
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
            Meta::I32s(v) => {
                out.extend_from_slice(&9u32.to_le_bytes());
                out.extend_from_slice(&5u32.to_le_bytes());
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    GgufFile::from_bytes(out).expect("test GGUF parses")
}

/// A SentencePiece vocabulary: (text, score, type).
fn spm_tokenizer(extra: &[(&str, f32, i32)], add_space_prefix: bool) -> Tokenizer {
    let mut toks: Vec<(String, f32, i32)> =
        vec![("<unk>".into(), 0.0, 2), ("<s>".into(), 0.0, 3), ("</s>".into(), 0.0, 3)];
    for b in 0..256 {
        toks.push((format!("<0x{b:02X}>"), 0.0, 6));
    }
    toks.extend(extra.iter().map(|&(t, s, ty)| (t.to_string(), s, ty)));
    gguf_tokenizer(vec![
        ("tokenizer.ggml.model", Meta::Str("llama")),
        ("tokenizer.ggml.tokens", Meta::Strs(toks.iter().map(|t| t.0.clone()).collect())),
        ("tokenizer.ggml.scores", Meta::F32s(toks.iter().map(|t| t.1).collect())),
        ("tokenizer.ggml.token_type", Meta::I32s(toks.iter().map(|t| t.2).collect())),
        ("tokenizer.ggml.add_space_prefix", Meta::Bool(add_space_prefix)),
    ])
}

fn gguf_tokenizer(kvs: Vec<(&str, Meta<'_>)>) -> Tokenizer {
    Tokenizer::from_gguf(&gguf(kvs)).expect("tokenizer loads")
}

fn texts(tok: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| tok.token_text(id).unwrap_or("?").to_string()).collect()
}

#[test]
fn spm_merges_by_score_and_falls_back_to_bytes() {
    let tok = spm_tokenizer(
        &[
            ("▁", -1.0, 1),
            ("a", -1.0, 1),
            ("b", -1.0, 1),
            ("ab", -2.0, 1),
            ("▁a", -0.5, 1),
            ("▁ab", -3.0, 1),
            ("c", -1.0, 1),
        ],
        false,
    );
    assert_eq!(tok.bos_id(), Some(1));
    assert_eq!(tok.eos_id(), Some(2));
    assert!(tok.add_bos_default());
    // "▁a" (-0.5) beats "ab" (-2); then "▁a"+"b" forms "▁ab".
    let ids = tok.encode(" ab", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["▁ab"]);
    // 'é' is no token: its two UTF-8 bytes come out as byte tokens.
    let ids = tok.encode("cé", true, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["<s>", "c", "<0xC3>", "<0xA9>"]);
    assert_eq!(tok.decode(&ids, true), "cé");
    assert_eq!(tok.decode(&ids, false), "<s>cé");
    // A cut-off character is replaced at the end only.
    assert_eq!(tok.decode(&ids[..3], true), "c\u{FFFD}");
}

#[test]
fn spm_space_prefix_after_specials() {
    let tok = spm_tokenizer(&[("▁", -1.0, 1), ("a", -1.0, 1), ("▁a", -0.5, 1), ("<t>", 0.0, 3)], true);
    let ids = tok.encode("a<t>a", false, true).unwrap();
    assert_eq!(texts(&tok, &ids), ["▁a", "<t>", "▁a"]);
    let ids = tok.encode("a<t>a", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["▁a", "<0x3C>", "<0x74>", "<0x3E>", "a"]);
}

#[test]
#[allow(clippy::single_range_in_vec_init)]
fn special_partition_longest_first_and_user_defined() {
    let tok = spm_tokenizer(
        &[
            ("x", -1.0, 1),
            ("y", -1.0, 1),
            ("<a>", 0.0, 3),
            ("<a><b>", 0.0, 3),
            ("<b>", 0.0, 4),
            ("abcd", 0.0, 3),
            ("xa", 0.0, 3),
            ("a", -1.0, 1),
            ("b", -1.0, 1),
            ("c", -1.0, 1),
            ("d", -1.0, 1),
        ],
        false,
    );
    let ids = tok.encode("x<a><b>y<b>", false, true).unwrap();
    assert_eq!(texts(&tok, &ids), ["x", "<a><b>", "y", "<b>"]);
    // Without special parsing control tokens are text, user-defined ones still match.
    let ids = tok.encode("x<a><b>y<b>", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["x", "<0x3C>", "a", "<0x3E>", "<b>", "y", "<b>"]);
    // The longer special text wins even though the shorter one starts first.
    let ids = tok.encode("xabcd", false, true).unwrap();
    assert_eq!(texts(&tok, &ids), ["x", "abcd"]);
    // Overlapping occurrences of one token: leftmost first.
    let ids = tok.encode("<a><a>", false, true).unwrap();
    assert_eq!(texts(&tok, &ids), ["<a>", "<a>"]);
    assert!(tok.is_control(tok.token_id("<a>").unwrap()));
    assert!(!tok.is_control(tok.token_id("<b>").unwrap()));

    // Plain ranges keep control texts inside them as text, and only there.
    let text = "<a>x<a>y<b><a>";
    assert!(tok.contains_control_text(text));
    assert!(!tok.contains_control_text("x<b>y"));
    let ids = tok.encode_with_plain_ranges(text, false, &[4..11]).unwrap();
    assert_eq!(texts(&tok, &ids), ["<a>", "x", "<0x3C>", "a", "<0x3E>", "y", "<b>", "<a>"]);
    // A special text that only starts before a plain range still overlaps it.
    let ids = tok.encode_with_plain_ranges("<a>", false, &[2..3]).unwrap();
    assert_eq!(texts(&tok, &ids), ["<0x3C>", "a", "<0x3E>"]);
    assert_eq!(tok.encode_with_plain_ranges(text, false, &[]).unwrap(), tok.encode(text, false, true).unwrap());
    assert!(tok.encode_with_plain_ranges(text, false, &[4..6, 5..7]).is_err());
    assert!(tok.encode_with_plain_ranges(text, false, &[4..99]).is_err());
}

/// A byte-level BPE vocabulary: the 256 byte characters, then `extra`, with `merges`.
fn bpe_tokenizer(extra: &[(&str, i32)], merges: &[&str], pre: &str) -> Tokenizer {
    let mut toks: Vec<(String, i32)> =
        (0..256).map(|b| (char::from_u32(bpe::BYTE_TO_CHAR[b] as u32).unwrap().to_string(), 1)).collect();
    toks.extend(extra.iter().map(|&(t, ty)| (t.to_string(), ty)));
    gguf_tokenizer(vec![
        ("tokenizer.ggml.model", Meta::Str("gpt2")),
        ("tokenizer.ggml.pre", Meta::Str(pre)),
        ("tokenizer.ggml.tokens", Meta::Strs(toks.iter().map(|t| t.0.clone()).collect())),
        ("tokenizer.ggml.token_type", Meta::I32s(toks.iter().map(|t| t.1).collect())),
        ("tokenizer.ggml.merges", Meta::Strs(merges.iter().map(|m| m.to_string()).collect())),
        ("tokenizer.ggml.eos_token_id", Meta::U32(256)),
    ])
}

#[test]
fn bpe_merges_by_rank() {
    let tok = bpe_tokenizer(
        &[("<|endoftext|>", 3), ("ab", 1), ("bc", 1), ("abc", 1), ("Ġa", 1)],
        &["b c", "a b", "a bc", "Ġ a"],
        "gpt2",
    );
    assert!(!tok.add_bos_default());
    assert_eq!(tok.eog_ids(), [256]);
    // "b c" ranks before "a b": abc = a + bc -> abc.
    let ids = tok.encode("abc", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["abc"]);
    let ids = tok.encode(" ab", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["Ġ", "ab"]);
    assert_eq!(tok.decode(&ids, true), " ab");
    let ids = tok.encode("a<|endoftext|>", false, true).unwrap();
    assert_eq!(texts(&tok, &ids), ["a", "<|endoftext|>"]);
    assert_eq!(tok.decode(&ids, true), "a");
    assert_eq!(tok.decode(&ids, false), "a<|endoftext|>");
    assert!(tok.is_eog(256));
}

#[test]
fn bpe_merge_result_missing_from_vocab_falls_back_to_bytes() {
    // "x y" makes "xy", which is no token; "xy z" then needs it as an intermediate.
    let tok = bpe_tokenizer(&[("xyz", 1)], &["x y", "xy z", "q r"], "unknown-pre");
    let ids = tok.encode("xyz", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["xyz"]);
    let ids = tok.encode("xyq", false, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["x", "y", "q"]);
    assert_eq!(tok.vocab_size(), 257);
    assert_eq!(tok.token_text(257), None);
}

#[test]
fn stream_decoder_matches_decode() {
    let tok = spm_tokenizer(&[("a", -1.0, 1)], false);
    let text = "a🎉é東a";
    let ids = tok.encode(text, false, false).unwrap();
    let mut dec = tok.stream_decoder(true);
    let mut all = String::new();
    for &id in &ids {
        all.push_str(&dec.push(id));
    }
    all.push_str(&dec.finish());
    assert_eq!(all, text);
    assert_eq!(tok.decode(&ids, true), text);
}

#[test]
fn tokenizer_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
}

#[test]
fn decode_bytes_skips_control_tokens() {
    let tok = spm_tokenizer(&[("a", -1.0, 1), ("<u>", 0.0, 4)], false);
    let ids = tok.encode("a<u>é", true, false).unwrap();
    assert_eq!(texts(&tok, &ids), ["<s>", "a", "<u>", "<0xC3>", "<0xA9>"]);
    assert_eq!(tok.decode_bytes(&ids), "a<u>é".as_bytes());
    // Cut inside 'é': the bytes are returned as they are.
    assert_eq!(tok.decode_bytes(&ids[..4]), b"a<u>\xC3");
    assert_eq!(tok.token_to_bytes(1, false), b"");
    assert_eq!(tok.token_to_bytes(1, true), b"<s>");
    assert_eq!(tok.token_to_bytes(u32::MAX, true), b"");
}
