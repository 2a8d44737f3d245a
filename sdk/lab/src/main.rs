//! `tern-lab`: the research tools over the engine, kept out of the product CLI. They reach the
//! engine's internals through `tern`'s `lab` feature.

mod acceptance_data;
mod bandwidth;
mod bench_workloads;
mod drafts;
mod pass_cost;
mod tune_simulated;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tern-lab", version, about = "Research tools over the Tern engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// `tern bench-workloads` with bounds (hindsight, tree, copy), cost curves, priced runs,
    /// fixed draft lengths and llama.cpp's prompt-lookup decoding beside.
    BenchWorkloads(bench_workloads::LabBenchArgs),
    /// Labelled drafter-tree nodes at every answer position of a workloads file (JSON lines), for
    /// fitting the acceptance model's starting weights (scripts/fit_acceptance.py).
    AcceptanceData(acceptance_data::AcceptanceDataArgs),
    /// Forward passes over chains of n drafted tokens after a context, timed (A/B timing of the
    /// verification pass).
    PassCost(pass_cost::PassCostArgs),
    /// The energy tuner on the simulated phones, against an exhaustive search.
    TuneSimulated(tune_simulated::TuneSimulatedArgs),
    /// A plain read over a buffer far larger than the caches (GB/s), the yardstick of decode.
    Bandwidth(bandwidth::BandwidthArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::BenchWorkloads(a) => bench_workloads::run(a),
        Command::AcceptanceData(a) => acceptance_data::run(a),
        Command::PassCost(a) => pass_cost::run(a),
        Command::TuneSimulated(a) => tune_simulated::run(a),
        Command::Bandwidth(a) => bandwidth::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
