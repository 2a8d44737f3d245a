//! Pre-tokenizers of byte-level BPE models: split text into words before merging.
//!
//! Hand-written equivalents of the regexes llama.cpp applies per `tokenizer.ggml.pre`
//! (`llm_tokenizer_bpe` in `llama-vocab.cpp`), following its `unicode_regex_split_custom_*`
//! functions: an ordered alternation tried at each position, first alternative that matches
//! wins. Text outside any match becomes a word of its own, as in llama.cpp.

use super::unicode::{class_of, LETTER_FLAG, MARK_FLAG, NUMBER_FLAG, OTHER_FLAG, SPACE_FLAG};

/// Past the end of the current piece: matches no class, like llama.cpp's `OUT_OF_RANGE`.
const OUT: u8 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PreTokenizer {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2,
    /// `\p{N}` isolated first, then the GPT-2 pattern on the pieces between (smollm, starcoder).
    DigitsThenGpt2,
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    /// with D = 1 (qwen2) or 3 (llama3). With `marks` (qwen35) combining marks join letter
    /// runs: `[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+` and ` ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*`.
    Llama3 { max_digits: usize, marks: bool },
    /// `[^\n]+|[\n]+`: runs of line breaks apart from the rest (Gemma 4, whose merges then run
    /// over whole lines).
    Lines,
}

impl PreTokenizer {
    /// The splitter for a `tokenizer.ggml.pre` value; `None` when it is not one of ours.
    pub(super) fn from_name(pre: &str) -> Option<Self> {
        Some(match pre {
            "gpt2" | "gpt-2" | "mpt" | "olmo" | "phi-2" | "jina-es" | "jina-de" | "jina-v2-es" | "jina-v2-de"
            | "jais" | "trillion" | "granite-docling" | "exaone4" | "mellum" | "modern-bert" | "gigachat"
            | "a.x-4.0" => PreTokenizer::Gpt2,
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva-7b" => {
                PreTokenizer::DigitsThenGpt2
            }
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "megrez" | "hunyuan" | "grok-2" | "kormo" => {
                PreTokenizer::Llama3 { max_digits: 1, marks: false }
            }
            "qwen35" => PreTokenizer::Llama3 { max_digits: 1, marks: true },
            "gemma4" => PreTokenizer::Lines,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "pixtral" | "dbrx" | "smaug-bpe" | "chatglm-bpe"
            | "glm4" | "lfm2" => PreTokenizer::Llama3 { max_digits: 3, marks: false },
            _ => return None,
        })
    }

    /// Appends to `words` the byte ranges of `text`'s words, in order, covering all of it.
    pub(super) fn split(self, text: &str, scratch: &mut SplitScratch, words: &mut Vec<(usize, usize)>) {
        let SplitScratch { chars, offs, cls, ends } = scratch;
        chars.clear();
        offs.clear();
        cls.clear();
        ends.clear();
        // Only the qwen35 pattern tells marks apart; for the others they are "other".
        let marks = matches!(self, PreTokenizer::Llama3 { marks: true, .. });
        for (i, c) in text.char_indices() {
            chars.push(c);
            offs.push(i);
            let class = class_of(c);
            cls.push(if class == MARK_FLAG && !marks { OTHER_FLAG } else { class });
        }
        offs.push(text.len());
        let n = chars.len();
        let p = Piece { chars, cls };
        match self {
            PreTokenizer::Gpt2 => p.gpt2(0, n, ends),
            PreTokenizer::DigitsThenGpt2 => {
                // Every number character is a piece of its own; the runs between are split by
                // the GPT-2 pattern, which never looks across a piece boundary.
                let mut start = 0;
                for (i, &c) in cls.iter().enumerate() {
                    if c == NUMBER_FLAG {
                        p.gpt2(start, i, ends);
                        ends.push(i + 1);
                        start = i + 1;
                    }
                }
                p.gpt2(start, n, ends);
            }
            PreTokenizer::Llama3 { max_digits, .. } => p.llama3(0, n, max_digits, ends),
            PreTokenizer::Lines => {
                for i in 1..n {
                    if (chars[i] == '\n') != (chars[i - 1] == '\n') {
                        ends.push(i);
                    }
                }
                ends.push(n);
            }
        }
        let mut prev = 0;
        for &e in ends.iter() {
            if e > prev {
                words.push((offs[prev], offs[e]));
                prev = e;
            }
        }
    }
}

/// Buffers reused across calls.
#[derive(Default)]
pub(super) struct SplitScratch {
    chars: Vec<char>,
    offs: Vec<usize>,
    cls: Vec<u8>,
    /// Word ends, as character indices.
    ends: Vec<usize>,
}

struct Piece<'a> {
    chars: &'a [char],
    cls: &'a [u8],
}

impl Piece<'_> {
    fn gpt2(&self, ini: usize, end: usize, ends: &mut Vec<usize>) {
        let cls = |p: usize| if p < end { self.cls[p] } else { OUT };
        let chars = self.chars;
        let mut pos = ini;
        while pos < end {
            let c = chars[pos];
            if c == '\'' && pos + 1 < end {
                let n1 = chars[pos + 1];
                if matches!(n1, 's' | 't' | 'm' | 'd') {
                    pos += 2;
                    ends.push(pos);
                    continue;
                }
                if pos + 2 < end && matches!((n1, chars[pos + 2]), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                    pos += 3;
                    ends.push(pos);
                    continue;
                }
            }
            let space = (c == ' ') as usize;
            let f = cls(pos + space);
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run of one class.
            if matches!(f, LETTER_FLAG | NUMBER_FLAG | OTHER_FLAG) {
                pos += space;
                while cls(pos) == f {
                    pos += 1;
                }
                ends.push(pos);
                continue;
            }
            let mut n_ws = 0;
            while cls(pos + n_ws) == SPACE_FLAG {
                n_ws += 1;
            }
            if n_ws > 1 && pos + n_ws < end {
                // `\s+(?!\S)`: leave the last space to prefix the next word.
                pos += n_ws - 1;
            } else if n_ws > 0 {
                pos += n_ws;
            } else {
                pos += 1;
            }
            ends.push(pos);
        }
    }

    fn llama3(&self, ini: usize, end: usize, max_digits: usize, ends: &mut Vec<usize>) {
        let cls = |p: usize| if p < end { self.cls[p] } else { OUT };
        let chars = self.chars;
        let is_rn = |c: char| c == '\r' || c == '\n';
        let mut pos = ini;
        while pos < end {
            let c = chars[pos];
            let f = self.cls[pos];
            // `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
            if c == '\'' && pos + 1 < end {
                let n1 = chars[pos + 1].to_ascii_lowercase();
                if matches!(n1, 's' | 't' | 'm' | 'd') {
                    pos += 2;
                    ends.push(pos);
                    continue;
                }
                if pos + 2 < end
                    && matches!((n1, chars[pos + 2].to_ascii_lowercase()), ('r', 'e') | ('v', 'e') | ('l', 'l'))
                {
                    pos += 3;
                    ends.push(pos);
                    continue;
                }
            }
            // `[^\r\n\p{L}\p{N}]?\p{L}+` (marks count as letters when the splitter keeps them apart:
            // with other patterns no character has MARK_FLAG)
            let letter = |class: u8| class == LETTER_FLAG || class == MARK_FLAG;
            if letter(f) || (f != NUMBER_FLAG && !is_rn(c) && letter(cls(pos + 1))) {
                pos += 1;
                while letter(cls(pos)) {
                    pos += 1;
                }
                ends.push(pos);
                continue;
            }
            // `\p{N}{1,D}`
            if f == NUMBER_FLAG {
                let start = pos;
                while pos - start < max_digits && cls(pos) == NUMBER_FLAG {
                    pos += 1;
                }
                ends.push(pos);
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
            if f == OTHER_FLAG || (c == ' ' && cls(pos + 1) == OTHER_FLAG) {
                pos += (c == ' ') as usize;
                while cls(pos) == OTHER_FLAG {
                    pos += 1;
                }
                while pos < end && is_rn(chars[pos]) {
                    pos += 1;
                }
                ends.push(pos);
                continue;
            }
            let mut n_ws = 0;
            let mut after_last_rn = None;
            while cls(pos + n_ws) == SPACE_FLAG {
                if is_rn(chars[pos + n_ws]) {
                    after_last_rn = Some(pos + n_ws + 1);
                }
                n_ws += 1;
            }
            if let Some(e) = after_last_rn {
                // `\s*[\r\n]+`: backtracks to the last line break of the run.
                pos = e;
            } else if n_ws > 1 && pos + n_ws < end {
                // `\s+(?!\S)`
                pos += n_ws - 1;
            } else if n_ws > 0 {
                pos += n_ws;
            } else {
                pos += 1;
            }
            ends.push(pos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(p: PreTokenizer, text: &str) -> Vec<&str> {
        let mut scratch = SplitScratch::default();
        let mut out = Vec::new();
        p.split(text, &mut scratch, &mut out);
        out.into_iter().map(|(a, b)| &text[a..b]).collect()
    }

    #[test]
    fn gpt2_words() {
        let p = PreTokenizer::Gpt2;
        assert_eq!(words(p, "Hello  world"), ["Hello", " ", " world"]);
        assert_eq!(words(p, "it's 12 o'clock!!"), ["it", "'s", " 12", " o", "'", "clock", "!!"]);
        assert_eq!(words(p, "a\n\n b  "), ["a", "\n\n", " b", "  "]);
        assert_eq!(words(p, "x\ty"), ["x", "\t", "y"]);
        assert_eq!(words(p, "I'LL"), ["I", "'", "LL"]);
        assert_eq!(words(p, ""), Vec::<&str>::new());
    }

    #[test]
    fn digits_isolated_before_gpt2() {
        let p = PreTokenizer::DigitsThenGpt2;
        assert_eq!(words(p, "It's 3:45pm"), ["It", "'s", " ", "3", ":", "4", "5", "pm"]);
        assert_eq!(words(p, "a 12b"), ["a", " ", "1", "2", "b"]);
    }

    #[test]
    fn qwen2_words() {
        let p = PreTokenizer::Llama3 { max_digits: 1, marks: false };
        assert_eq!(words(p, "Hello  world\n\nNew.\tTab"), ["Hello", " ", " world", "\n\n", "New", ".", "\tTab"]);
        assert_eq!(words(p, "I'LL 123"), ["I", "'LL", " ", "1", "2", "3"]);
        assert_eq!(words(p, "x  \n  \n  y"), ["x", "  \n  \n", " ", " y"]);
        assert_eq!(words(p, "(≈12.5%)!\n"), ["(≈", "1", "2", ".", "5", "%)!\n"]);
        assert_eq!(words(p, "end  "), ["end", "  "]);
        let p3 = PreTokenizer::Llama3 { max_digits: 3, marks: false };
        assert_eq!(words(p3, "1234567"), ["123", "456", "7"]);
    }

    #[test]
    fn lines() {
        assert_eq!(words(PreTokenizer::Lines, "a b\n\nc\n"), ["a b", "\n\n", "c", "\n"]);
        assert_eq!(words(PreTokenizer::Lines, "\n"), ["\n"]);
    }

    #[test]
    fn qwen35_keeps_marks_with_letters() {
        let p = PreTokenizer::Llama3 { max_digits: 1, marks: true };
        // U+17CB is a Khmer sign (a mark): part of the word, where qwen2 splits it off.
        assert_eq!(words(p, "កាន\u{17CB}តែ y'all"), ["កាន\u{17CB}តែ", " y", "'all"]);
        assert_eq!(words(p, "a\u{0301}!\u{0301}"), ["a\u{0301}", "!\u{0301}"]);
        let q = PreTokenizer::Llama3 { max_digits: 1, marks: false };
        assert_eq!(words(q, "a\u{0301}!\u{0301}"), ["a", "\u{0301}!\u{0301}"]);
    }
}
