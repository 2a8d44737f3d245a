//! Incremental detokenization: token ids in, complete UTF-8 text out.

use super::Tokenizer;

/// Turns generated ids into text as they arrive. A character split across tokens (emoji, CJK
/// in byte-fallback vocabularies) is held back until its last byte arrives; bytes that can
/// never form a character become U+FFFD at once, exactly where [`Tokenizer::decode`] puts
/// them, so the pieces always concatenate to `decode` of all ids.
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    skip_special: bool,
    pending: Vec<u8>,
}

impl<'a> StreamDecoder<'a> {
    pub(super) fn new(tok: &'a Tokenizer, skip_special: bool) -> Self {
        StreamDecoder { tok, skip_special, pending: Vec::new() }
    }

    /// Adds one id; returns the text completed by it (often empty while a character is open).
    pub fn push(&mut self, id: u32) -> String {
        self.tok.append_token_bytes(id, !self.skip_special, &mut self.pending);
        let mut out = String::new();
        let used = take_complete(&self.pending, &mut out);
        self.pending.drain(..used);
        out
    }

    /// Ends the stream: whatever is still held back, an unfinished character as U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    /// Bytes held back, waiting for the rest of a character.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }
}

/// Appends the longest prefix of `bytes` that no later byte can change (invalid sequences as
/// U+FFFD, like `String::from_utf8_lossy`) and returns its length; an incomplete but still
/// possible sequence at the end stays.
fn take_complete(bytes: &[u8], out: &mut String) -> usize {
    let mut start = 0;
    loop {
        match std::str::from_utf8(&bytes[start..]) {
            Ok(s) => {
                out.push_str(s);
                return bytes.len();
            }
            Err(e) => {
                let good = start + e.valid_up_to();
                // The prefix was just validated; the lossy call copies it without replacements.
                out.push_str(&String::from_utf8_lossy(&bytes[start..good]));
                match e.error_len() {
                    None => return good,
                    Some(bad) => {
                        out.push('\u{FFFD}');
                        start = good + bad;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::take_complete;

    #[test]
    fn holds_incomplete_tail_only() {
        let mut out = String::new();
        let emoji = "🎉".as_bytes();
        assert_eq!(take_complete(&emoji[..2], &mut out), 0);
        assert_eq!(out, "");
        let mut buf = b"ab".to_vec();
        buf.extend_from_slice(&emoji[..3]);
        assert_eq!(take_complete(&buf, &mut out), 2);
        assert_eq!(out, "ab");
        out.clear();
        // An impossible byte is replaced at once and does not block what follows.
        assert_eq!(take_complete(b"\xFFx\xE2\x96", &mut out), 2);
        assert_eq!(out, "\u{FFFD}x");
        out.clear();
        // A sequence cut short by an ASCII byte: one replacement, as from_utf8_lossy.
        assert_eq!(take_complete(b"\xF0\x9Fa", &mut out), 3);
        assert_eq!(out, String::from_utf8_lossy(b"\xF0\x9Fa"));
    }
}
