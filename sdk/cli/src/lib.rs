//! `tern`: run, chat, tokenize, score, benchmark and inspect GGUF models from the terminal.
//!
//! The commands are a library too, so that `tern-lab` (sdk/lab), the research tools, builds on
//! the same model loading, workload runs and output.

pub mod args;
pub mod bench;
pub mod bench_workloads;
mod chat;
pub mod energy;
pub mod error;
mod info;
pub mod output;
mod pull;
mod run;
mod score;
mod structured;
mod tokenize;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tern", version, about = "On-device LLM inference over GGUF models")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Answer one prompt, streaming the text to stdout and the stats to stderr.
    Run(run::RunArgs),
    /// Multi-turn chat on stdin (/reset starts over, /quit or end of input exits).
    Chat(chat::ChatArgs),
    /// Print a text's token ids as a JSON array.
    Tokenize(tokenize::TokenizeArgs),
    /// Teacher-forced top-K logits at every position of a token sequence.
    Score(score::ScoreArgs),
    /// Prefill and decode speed, load time and peak memory (like llama-bench).
    Bench(bench::BenchArgs),
    /// Plain against speculative decoding over a workloads file (speed-up, acceptance, identity).
    BenchWorkloads(bench_workloads::BenchWorkloadsArgs),
    /// Architecture, size and tensor types of a model file.
    Info(info::InfoArgs),
    /// The `ui` workload cases with and without the action schema: valid actions and constraint cost.
    BenchStructured(structured::BenchStructuredArgs),
    /// Energy: tune the decode cores of this machine.
    Energy(energy::EnergyArgs),
    /// Download a model into the model directory (resumable, hash-checked), with progress.
    Pull(pull::PullArgs),
}

/// The `tern` command line.
pub fn main() -> ExitCode {
    // clap prints its own usage errors and exits with 2 (0 for --help/--version).
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Chat(a) => chat::run(a),
        Command::Tokenize(a) => tokenize::run(a),
        Command::Score(a) => score::run(a),
        Command::Bench(a) => bench::run(a),
        Command::BenchWorkloads(a) => bench_workloads::run(a),
        Command::Info(a) => info::run(a),
        Command::BenchStructured(a) => structured::run(a),
        Command::Energy(a) => energy::run(a),
        Command::Pull(a) => pull::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
