//! Where message contents sit in a rendered prompt, so that their text can be tokenized as
//! text while the template's own markup becomes control tokens.
//!
//! The conversation is rendered a second time with the contents in question replaced by
//! placeholders; the rendering is the placeholder skeleton with each placeholder replaced by its
//! content, as written or without surrounding whitespace (templates that `trim` print that).
//! The two renderings are walked side by side, so a content is found where the template put
//! it, not wherever its text first appears (a pasted `<|im_end|>` is never mistaken for the
//! markup's). A template that does more with a content than print or trim it gives no ranges.

use std::ops::Range;

use super::Message;

const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// The stand-in for message `index`: private-use characters around a number, which no
/// vocabulary parses as a special token and `trim` leaves alone.
pub(crate) fn placeholder(index: usize) -> String {
    format!("{OPEN}{index}{CLOSE}")
}

/// `messages` with the content of every message `replace` selects turned into its
/// [`placeholder`], and the indices replaced.
pub(crate) fn with_placeholders(
    messages: &[Message],
    replace: impl Fn(&Message) -> bool,
) -> (Vec<Message>, Vec<usize>) {
    let mut replaced = Vec::new();
    let probe = messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            if replace(m) {
                replaced.push(i);
                Message::new(m.role, placeholder(i))
            } else {
                m.clone()
            }
        })
        .collect();
    (probe, replaced)
}

/// The byte ranges of `rendered` where the placeholders of `skeleton` (a rendering of the same
/// conversation through [`with_placeholders`]) stand, in order; `None` when `rendered` is not
/// the skeleton with each placeholder replaced by its message's content, as written or trimmed.
pub(crate) fn content_ranges(rendered: &str, skeleton: &str, messages: &[Message]) -> Option<Vec<Range<usize>>> {
    let mut ranges = Vec::new();
    let mut at = 0; // position in `rendered`
    let mut rest = skeleton;
    while let Some(open) = rest.find(OPEN) {
        let markup = &rest[..open];
        if !rendered[at..].starts_with(markup) {
            return None;
        }
        at += markup.len();
        let after = &rest[open + OPEN.len_utf8()..];
        let close = after.find(CLOSE)?;
        let index: usize = after[..close].parse().ok()?;
        let content = &messages.get(index)?.content;
        let printed = [content.as_str(), content.trim()].into_iter().find(|c| rendered[at..].starts_with(c))?;
        ranges.push(at..at + printed.len());
        at += printed.len();
        rest = &after[close + CLOSE.len_utf8()..];
    }
    (rendered[at..] == *rest).then_some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::single_range_in_vec_init)]
    fn finds_contents_where_the_template_put_them() {
        let messages = [Message::user("  <|im_end|>x  "), Message::assistant("ok")];
        let (probe, replaced) = with_placeholders(&messages, |m| m.content.contains("<|"));
        assert_eq!(replaced, [0]);
        assert_eq!(probe[1].content, "ok");
        // The markup holds the content's text too; the range is the content's own place.
        let skeleton = format!("<|im_end|>[{}]<|im_end|>ok", placeholder(0));
        let rendered = "<|im_end|>[<|im_end|>x]<|im_end|>ok";
        assert_eq!(content_ranges(rendered, &skeleton, &messages), Some(vec![11..22]));
        let verbatim = "<|im_end|>[  <|im_end|>x  ]<|im_end|>ok";
        assert_eq!(content_ranges(verbatim, &skeleton, &messages), Some(vec![11..26]));
        // A content printed in another form, or markup that changed, gives nothing.
        assert_eq!(content_ranges("<|im_end|>[<|IM_END|>X]<|im_end|>ok", &skeleton, &messages), None);
        assert_eq!(content_ranges("<|im_end|>[<|im_end|>x]<|im_end|>no", &skeleton, &messages), None);
        assert_eq!(content_ranges("plain", "plain", &messages), Some(vec![]));
    }
}
