//! Code in the docs that is compiled and run: a page marks a code block with
//! `<!-- snippet: PATH#NAME -->` on the line before its fence, and the block must equal the
//! lines between `snippet:begin NAME` and `snippet:end` in PATH (a sample file the Kotlin or
//! Swift suite compiles and calls). `cargo xtask snippets` rewrites the pages from the samples;
//! the test below fails when they differ.

use std::path::Path;

use crate::util::TaskError;

/// Pages whose code blocks come from samples.
pub const PAGES: &[&str] = &["docs/android.md", "docs/ios.md"];

const MARKER: &str = "<!-- snippet: ";

/// The page with every marked block replaced by its snippet's current text.
pub fn render(root: &Path, page: &str) -> Result<String, String> {
    let lines: Vec<&str> = page.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        out.push(line.to_owned());
        i += 1;
        let Some(reference) = line.trim().strip_prefix(MARKER).and_then(|r| r.strip_suffix(" -->")) else {
            continue;
        };
        let fence =
            lines.get(i).filter(|l| l.starts_with("```")).ok_or(format!("`{line}` is not followed by a code fence"))?;
        out.push(fence.to_string());
        let end = lines[i + 1..]
            .iter()
            .position(|l| l.trim_end() == "```")
            .ok_or(format!("unclosed code block after `{line}`"))?;
        out.extend(snippet(root, reference)?.lines().map(str::to_owned));
        out.push("```".into());
        i += 1 + end + 1;
    }
    let mut text = out.join("\n");
    text.push('\n');
    Ok(text)
}

/// The lines between `snippet:begin NAME` and `snippet:end` in the file of `PATH#NAME`.
fn snippet(root: &Path, reference: &str) -> Result<String, String> {
    let (path, name) = reference.split_once('#').ok_or(format!("snippet `{reference}` is not PATH#NAME"))?;
    let text = std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = text.lines().skip_while(|l| !is_tag(l, &format!("snippet:begin {name}")));
    lines.next().ok_or(format!("{path} has no `snippet:begin {name}`"))?;
    let body: Vec<&str> = lines.by_ref().take_while(|l| !is_tag(l, "snippet:end")).collect();
    Ok(body.join("\n"))
}

fn is_tag(line: &str, tag: &str) -> bool {
    line.trim().strip_prefix("//").is_some_and(|rest| rest.trim() == tag)
}

/// Rewrites the pages from the samples.
pub fn update(root: &Path) -> Result<(), TaskError> {
    for page in PAGES {
        let path = root.join(page);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{page}: {e}"))?;
        let rendered = render(root, &text).map_err(|e| format!("{page}: {e}"))?;
        if rendered != text {
            std::fs::write(&path, rendered).map_err(|e| format!("{page}: {e}"))?;
            eprintln!("updated {page}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_show_the_compiled_samples() {
        let root = crate::util::workspace_root();
        for page in PAGES {
            let text = std::fs::read_to_string(root.join(page)).expect("page exists");
            assert!(text.contains(MARKER), "{page} has no snippets");
            let rendered = render(&root, &text).unwrap_or_else(|e| panic!("{page}: {e}"));
            assert!(rendered == text, "{page} differs from its samples: run `cargo xtask snippets`");
        }
    }

    #[test]
    fn replaces_marked_blocks_only() {
        let dir = std::env::temp_dir().join(format!("tern-snippets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s.kt"), "x\n// snippet:begin a\nval a = 1\n// snippet:end\ny\n").unwrap();
        let page = "intro\n<!-- snippet: s.kt#a -->\n```kotlin\nold\n```\n```kotlin\nuntouched\n```\n";
        let rendered = render(&dir, page).unwrap();
        assert_eq!(rendered, "intro\n<!-- snippet: s.kt#a -->\n```kotlin\nval a = 1\n```\n```kotlin\nuntouched\n```\n");
        assert!(render(&dir, "<!-- snippet: s.kt#b -->\n```\n```\n").unwrap_err().contains("snippet:begin b"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
