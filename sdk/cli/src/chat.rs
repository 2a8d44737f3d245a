//! `tern chat`: a multi-turn conversation on stdin.

use std::io::{self, BufRead, IsTerminal};
use std::sync::{Arc, Mutex};

use clap::Args;
use tern::{CancelHandle, FinishReason, OverflowPolicy, Session, SessionOptions};

use crate::args::{load, ModelArgs, RuntimeArgs, SamplingArgs};
use crate::error::{CliError, Result};
use crate::output::{self, Stdout};
use crate::run::stream;

#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// System prompt for the chat template
    #[arg(long)]
    pub system: Option<String>,
    /// Most tokens per answer
    #[arg(long, short = 'n', default_value_t = 512)]
    pub max_tokens: usize,
    /// Stop an answer when it contains this text (repeatable)
    #[arg(long = "stop", value_name = "STR")]
    pub stop: Vec<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

const HELP: &str = "commands: /reset (start over), /quit (or end of input); Ctrl-C stops an answer";

pub fn run(a: ChatArgs) -> Result<()> {
    let loaded = load(&a.model, a.runtime.threads(), a.runtime.ctx())?;
    let info = loaded.engine.info();
    let interactive = io::stdin().is_terminal();
    if interactive {
        eprintln!("{} ({}) loaded in {} ms; {HELP}", info.name, info.architecture, loaded.load_time.as_millis());
    }
    let opts = SessionOptions {
        system_prompt: a.system.clone(),
        sampling: Some(a.sampling.options(&loaded.engine.info().sampling)),
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        context_length: a.runtime.ctx(),
        // A long chat goes on past the context, forgetting its oldest turns.
        overflow: OverflowPolicy::DropOldestTurns,
        ..Default::default()
    };
    let mut session = Session::new(loaded.engine.clone(), opts)?;
    let interrupt = Interrupt::install(session.cancel_handle())?;
    let mut lines = Lines::new(interactive);
    let mut out = Stdout::new();
    let (mut turns, mut failed) = (0usize, 0usize);
    while let Some(line) = lines.next()? {
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => break,
            "/reset" => {
                session.reset();
                eprintln!("(conversation reset)");
                continue;
            }
            "/help" => {
                eprintln!("{HELP}");
                continue;
            }
            cmd if cmd.starts_with('/') && !cmd.contains(char::is_whitespace) => {
                eprintln!("unknown command {cmd}; {HELP}");
                continue;
            }
            _ => {}
        }
        turns += 1;
        interrupt.answering(true);
        let result = session.send(&line).map_err(CliError::from).and_then(|g| stream(g, &mut out));
        interrupt.answering(false);
        match result {
            Ok(Some(stats)) => {
                out.write("\n")?;
                eprintln!("{}", output::stats_line(&stats));
                match stats.finish_reason {
                    FinishReason::ContextFull => eprintln!("(the context is full: /reset to start a new conversation)"),
                    FinishReason::Cancelled => eprintln!("(stopped; the conversation goes on, Ctrl-C again quits)"),
                    _ => {}
                }
            }
            Ok(None) => {}
            Err(e) => {
                // One failed turn (say, an over-long message) should not end the conversation.
                failed += 1;
                eprintln!("error: {e}");
            }
        }
        if out.closed() {
            break;
        }
    }
    if failed > 0 {
        return Err(CliError::Other(format!("{failed} of {turns} turns failed")));
    }
    Ok(())
}

/// What Ctrl-C does: during an answer, the first stops it (the session keeps what was said);
/// a second before the answer has ended, or one while no answer runs, ends the program. (At a
/// terminal prompt the line editor sees Ctrl-C itself, and ends the loop.)
struct Interrupt(Arc<Mutex<InterruptState>>);

struct InterruptState {
    cancel: CancelHandle,
    answering: bool,
    pressed: bool,
}

impl Interrupt {
    fn install(cancel: CancelHandle) -> Result<Interrupt> {
        let state = Arc::new(Mutex::new(InterruptState { cancel, answering: false, pressed: false }));
        let handler_state = Arc::clone(&state);
        ctrlc::set_handler(move || {
            let mut s = handler_state.lock().unwrap_or_else(|p| p.into_inner());
            if s.answering && !s.pressed {
                s.pressed = true;
                s.cancel.cancel();
            } else {
                std::process::exit(130);
            }
        })
        .map_err(|e| CliError::Other(format!("cannot handle Ctrl-C: {e}")))?;
        Ok(Interrupt(state))
    }

    /// Marks an answer as started or ended. At the end, a cancel that came too late to stop
    /// the answer is taken back, so that it cannot stop the next one. (Both happen under the
    /// lock the handler takes, so no press falls between them.)
    fn answering(&self, on: bool) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !on && s.pressed {
            s.cancel.withdraw();
        }
        s.answering = on;
        s.pressed = false;
    }
}

/// The user's lines: a line editor with history at a terminal, plain lines from a pipe.
enum Lines {
    Editor(Box<rustyline::DefaultEditor>),
    Plain(io::StdinLock<'static>, String),
}

impl Lines {
    fn new(interactive: bool) -> Lines {
        let plain = || Lines::Plain(io::stdin().lock(), String::new());
        if !interactive {
            return plain();
        }
        match rustyline::DefaultEditor::new() {
            Ok(editor) => Lines::Editor(Box::new(editor)),
            Err(e) => {
                eprintln!("(no line editing: {e})");
                plain()
            }
        }
    }

    /// The next line without its line ending; `None` at the end of input (or Ctrl-C / Ctrl-D
    /// at the prompt).
    fn next(&mut self) -> Result<Option<String>> {
        match self {
            Lines::Editor(editor) => match editor.readline("> ") {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    Ok(Some(line))
                }
                Err(rustyline::error::ReadlineError::Interrupted | rustyline::error::ReadlineError::Eof) => Ok(None),
                Err(e) => Err(CliError::Other(format!("reading the prompt: {e}"))),
            },
            Lines::Plain(input, line) => {
                line.clear();
                if input.read_line(line)? == 0 {
                    return Ok(None);
                }
                Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()))
            }
        }
    }
}
