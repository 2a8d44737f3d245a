//! Writing results: stdout that tolerates a closed pipe, and the stats line on stderr.

use std::io::{self, Write};

use tern::{FinishReason, Stats};

/// Stdout for streamed text. `tern run | head -c 100` must end quietly rather than fail, so a
/// closed pipe marks the writer closed and the caller stops generating.
pub struct Stdout {
    out: io::Stdout,
    closed: bool,
}

impl Stdout {
    pub fn new() -> Self {
        Stdout { out: io::stdout(), closed: false }
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Writes and flushes (tokens must show as they come, not when a buffer fills).
    pub fn write(&mut self, s: &str) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut lock = self.out.lock();
        match lock.write_all(s.as_bytes()).and_then(|_| lock.flush()) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            r => r,
        }
    }

    pub fn line(&mut self, s: &str) -> io::Result<()> {
        self.write(s)?;
        self.write("\n")
    }
}

pub fn finish_reason(r: &FinishReason) -> &'static str {
    match r {
        FinishReason::EndOfGeneration => "end of generation",
        FinishReason::StopSequence => "stop sequence",
        FinishReason::MaxTokens => "max tokens",
        FinishReason::Cancelled => "cancelled",
        FinishReason::ContextFull => "context full",
    }
}

/// One line of stats for stderr.
pub fn stats_line(s: &Stats) -> String {
    let mut notes = Vec::new();
    if s.cached_tokens > 0 {
        notes.push(format!("{} cached", s.cached_tokens));
    }
    if s.dropped_messages > 0 {
        notes.push(format!("{} oldest messages dropped", s.dropped_messages));
    }
    let notes = if notes.is_empty() { String::new() } else { format!(" ({})", notes.join(", ")) };
    format!(
        "prompt {} tokens{notes} | ttft {:.0} ms | prefill {:.1} tok/s | decode {:.1} tok/s ({} tokens) | finish: {}",
        s.prompt_tokens,
        s.time_to_first_token.as_secs_f64() * 1e3,
        s.prefill_tokens_per_s,
        s.decode_tokens_per_s,
        s.generated_tokens,
        finish_reason(&s.finish_reason),
    )
}

pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
