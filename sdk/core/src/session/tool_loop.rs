//! The automatic tool loop: call → result → answer inside the session, until the model
//! answers in text. Bounded: after `max_calls` calls the next answer must be text.

use super::{FinishReason, Generation, Session, Stats};
use crate::error::{Error, Result};
use crate::tools::ToolCall;

/// The end of a tool loop: the model's text answer, and the calls it made on the way there.
#[derive(Debug, Clone)]
pub struct ToolLoopAnswer {
    pub text: String,
    /// Each call with the result the handler gave it, in order.
    pub calls: Vec<(ToolCall, String)>,
    /// Statistics of the last answer.
    pub stats: Stats,
}

impl Session {
    /// Sends `text` and runs the tools the model calls: each call goes to `run`, whose result
    /// is sent back, until the model answers in text. After `max_calls` calls the model must
    /// answer in text, so the loop always ends. The session needs tools
    /// ([`Self::set_tools`]); a cancelled answer ends the loop with [`Error::Cancelled`].
    pub fn send_with_tools(
        &mut self,
        text: &str,
        max_calls: usize,
        mut run: impl FnMut(&ToolCall) -> String,
    ) -> Result<ToolLoopAnswer> {
        if self.tools.is_none() {
            return Err(Error::InvalidOption("the tool loop needs tools: call set_tools first".into()));
        }
        let mut calls = Vec::new();
        let mut answer = finished(self.send(text)?)?;
        loop {
            let Some(call) = self.tool_call.clone() else {
                return Ok(ToolLoopAnswer { text: answer.0, calls, stats: answer.1 });
            };
            let result = run(&call);
            let next = if calls.len() + 1 >= max_calls {
                self.send_last_tool_result(&result)?
            } else {
                self.send_tool_result(&result)?
            };
            calls.push((call, result));
            answer = finished(next)?;
        }
    }
}

/// The text and statistics of an answer that was not cancelled.
fn finished(generation: Generation<'_>) -> Result<(String, Stats)> {
    let (text, stats) = generation.text_and_stats()?;
    if stats.finish_reason == FinishReason::Cancelled {
        return Err(Error::Cancelled);
    }
    Ok((text, stats))
}
