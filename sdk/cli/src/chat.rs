//! `tern chat`: a multi-turn conversation on stdin.

use std::io::{self, BufRead, IsTerminal, Write};

use clap::Args;
use tern::{FinishReason, Session, SessionOptions};

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

const HELP: &str = "commands: /reset (start over), /quit (or end of input)";

pub fn run(a: ChatArgs) -> Result<()> {
    let loaded = load(&a.model, a.runtime.threads(), a.runtime.ctx())?;
    let info = loaded.engine.info();
    let interactive = io::stdin().is_terminal();
    if interactive {
        eprintln!("{} ({}) loaded in {} ms; {HELP}", info.name, info.architecture, loaded.load_time.as_millis());
    }
    let opts = SessionOptions {
        system_prompt: a.system.clone(),
        sampling: a.sampling.options(),
        max_tokens: a.max_tokens,
        stop: a.stop.clone(),
        context_length: a.runtime.ctx(),
        ..Default::default()
    };
    let mut session = Session::new(loaded.engine.clone(), opts)?;
    let mut out = Stdout::new();
    let (mut turns, mut failed) = (0usize, 0usize);
    let mut input = io::stdin().lock();
    let mut line = String::new();
    loop {
        if interactive {
            eprint!("> ");
            let _ = io::stderr().flush();
        }
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break; // end of input
        }
        let text = line.trim_end_matches(['\n', '\r']);
        match text.trim() {
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
        let result = session.send(text).map_err(CliError::from).and_then(|g| stream(g, &mut out));
        match result {
            Ok(Some(stats)) => {
                out.write("\n")?;
                eprintln!("{}", output::stats_line(&stats));
                if matches!(stats.finish_reason, FinishReason::ContextFull) {
                    eprintln!("(the context is full: /reset to start a new conversation)");
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
