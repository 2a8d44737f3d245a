//! What a chat request does when the conversation no longer fits the session's context: refuse
//! it (the default), or leave out the oldest turns, never the system prompt or the new message.

use super::Session;
use crate::chat::{Message, Role};
use crate::error::Result;

/// What [`Session::send`] does with a conversation longer than the context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OverflowPolicy {
    /// Refuse the request with [`crate::Error::ContextOverflow`]; the session keeps everything.
    #[default]
    Error,
    /// Drop whole turns from the start of the conversation (a user message and what answered
    /// it) until the prompt leaves room for the answer: `max_tokens`, or a quarter of the
    /// context if that is less. The system prompt and the new message stay; the dropped
    /// messages leave [`Session::messages`], and [`crate::Stats::dropped_messages`] counts them.
    /// The rest of the conversation is computed again, since its positions moved.
    DropOldestTurns,
}

impl Session {
    /// The prompt for sending `message`, and how many of the oldest messages it leaves out.
    pub(super) fn fitting_prompt(&self, message: &Message) -> Result<(Vec<u32>, usize)> {
        let ids = self.prompt_ids(message)?;
        let capacity = self.kv.capacity();
        let room = self.opts.max_tokens.min(capacity / 4).max(1);
        if self.opts.overflow == OverflowPolicy::Error || ids.len() + room <= capacity {
            self.check_fits(ids.len())?;
            return Ok((ids, 0));
        }
        let (mut ids, mut dropped) = (ids, 0);
        while let Some(next) = next_turn(&self.messages, dropped) {
            dropped = next;
            ids = self.prompt_ids_after(dropped, message)?;
            if ids.len() + room <= capacity {
                break;
            }
        }
        // With every earlier turn gone, the new message alone must still fit.
        self.check_fits(ids.len())?;
        Ok((ids, dropped))
    }
}

/// Where the turn after the one starting at `from` starts: the next user message, or the end
/// when there is none; `None` when nothing is left to drop.
fn next_turn(messages: &[Message], from: usize) -> Option<usize> {
    if from >= messages.len() {
        return None;
    }
    let next = messages[from + 1..].iter().position(|m| m.role == Role::User);
    Some(next.map_or(messages.len(), |i| from + 1 + i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(role: Role) -> Message {
        Message { role, content: String::new() }
    }

    #[test]
    fn turns_start_at_user_messages() {
        let (u, a, t) = (m(Role::User), m(Role::Assistant), m(Role::Tool));
        let conversation = [u.clone(), a.clone(), u.clone(), a.clone(), t, a.clone(), u.clone()];
        assert_eq!(next_turn(&conversation, 0), Some(2));
        assert_eq!(next_turn(&conversation, 2), Some(6));
        assert_eq!(next_turn(&conversation, 6), Some(7));
        assert_eq!(next_turn(&conversation, 7), None);
        // A conversation restored without its first question: the answer goes with the next turn.
        assert_eq!(next_turn(&[a.clone(), u, a], 0), Some(1));
        assert_eq!(next_turn(&[], 0), None);
    }
}
