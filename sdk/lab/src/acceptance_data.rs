//! `tern-lab acceptance-data`: labelled examples for fitting the acceptance model's starting weights
//! (`tern::speculative::features::INITIAL_WEIGHTS`, with `scripts/fit_acceptance.py`), from
//! the greedy answers of a workloads file.
//!
//! For each case: the plain greedy answer, the model's predictions at the prompt positions a
//! session calibrates, then at every answer position the tree the drafter grows there (31 nodes,
//! width 3, depth 24: more than the controller lets a pass carry, so that deep nodes are
//! labelled too), with the answers of the task's earlier cases as history (as `tern
//! bench-workloads --history` gives them). Every node whose parent's path the answer followed
//! is one example, labelled by whether the answer's next token is the node's (what the model
//! accepts under greedy decoding): one JSON line on stdout (`task`, `label`, `depth`, `x`). Per
//! task, on stderr: how many tokens the trees held per position, against the longest run the
//! context held there (the copy run).

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde::Serialize;
use tern::speculative::features::AcceptanceModel;
use tern::SpeculationOptions;

use tern_cli::bench_workloads::{answer, prompt_ids, WorkloadRun};
use tern_cli::error::{CliError, Result};

use crate::bench_workloads::copy_runs;
use crate::drafts::{along_answer, calibrated_drafter, held, SHAPE};

#[derive(Args, Debug)]
pub struct AcceptanceDataArgs {
    #[command(flatten)]
    pub run: WorkloadRun,
}

#[derive(Serialize)]
struct Example<'a> {
    task: &'a str,
    label: u8,
    depth: usize,
    x: &'a [f32],
}

#[derive(Default)]
struct Tally {
    positions: usize,
    tree_tokens: usize,
    copy_tokens: usize,
    examples: usize,
}

pub fn run(a: AcceptanceDataArgs) -> Result<()> {
    let (cases, loaded) = a.run.start()?;
    let engine = loaded.engine;
    let acceptance = AcceptanceModel::default();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    // Per task, the answers of its earlier cases, as a history scope holds them (texts,
    // tokenized again when indexed).
    let mut history: BTreeMap<&str, Vec<Vec<u32>>> = BTreeMap::new();
    let mut on_path = Vec::new();
    for case in &cases {
        let (answer, _) = answer(&engine, case, SpeculationOptions::off())?;
        let prompt = prompt_ids(&engine, case)?;
        let sources = history.entry(&case.task).or_default();
        let mut drafter = calibrated_drafter(&engine, sources, &prompt)?;
        let text = engine.tokenizer().decode(&answer, true);
        sources.push(engine.tokenizer().encode(&text, false, false)?);

        let tally = tallies.entry(&case.task).or_default();
        let runs = copy_runs(&prompt, &answer);
        along_answer(&mut drafter, &answer, &acceptance, |i, tree| {
            // Parents come before their children: a node's parent is on the answer's path when
            // it is the root or was marked so already.
            on_path.clear();
            on_path.resize(tree.len(), false);
            on_path[0] = true;
            for (n, node) in tree.nodes().iter().enumerate().skip(1) {
                if !node.parent.is_some_and(|p| on_path[p]) {
                    continue;
                }
                let taken = answer.get(i + node.depth) == Some(&node.token);
                on_path[n] = taken;
                let example =
                    Example { task: &case.task, label: u8::from(taken), depth: node.depth, x: &node.features.0 };
                serde_json::to_writer(&mut out, &example).map_err(|e| CliError::Other(e.to_string()))?;
                out.write_all(b"\n")?;
                tally.examples += 1;
            }
            tally.positions += 1;
            tally.tree_tokens += held(tree, &answer, i);
            tally.copy_tokens += runs[i + 1].min(SHAPE.max_depth);
            Ok(())
        })?;
    }
    out.flush()?;
    for (task, t) in &tallies {
        let per = |x: usize| x as f64 / t.positions.max(1) as f64;
        eprintln!(
            "{task}: {} positions, {} examples; tokens the tree held {:.2} per position, the copy run {:.2} (at most {})",
            t.positions,
            t.examples,
            per(t.tree_tokens),
            per(t.copy_tokens),
            SHAPE.max_depth
        );
    }
    Ok(())
}
