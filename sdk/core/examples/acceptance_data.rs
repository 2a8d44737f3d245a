//! Labelled examples for fitting the acceptance model's starting weights
//! (`speculative::features::INITIAL_WEIGHTS`), from the greedy answers of a workloads file.
//!
//! For each case: the plain greedy answer, the model's calibrated predictions at the last
//! prompt positions (as a session's prefill computes them), then at every answer position the
//! tree the drafter grows there (31 nodes, width 3, depth 24: larger than the controller lets
//! a pass carry, so that deep nodes are labelled too). Every node whose parent's path the answer
//! followed is one example, labelled by whether the answer's next token is the node's (what
//! the model would accept under greedy decoding). The drafter indexes the answers of the task's
//! earlier cases as history, as `tern bench-workloads --history` gives them. One JSON line per example on stdout
//! (`task`, `label`, `depth`, `x`); per task, on stderr, how many tokens the trees held against
//! the longest run the context held (the copy run).
//!
//! `cargo run --release -p tern --example acceptance_data -- MODEL WORKLOADS [THREADS] > out.jsonl`
//! then `python3 scripts/fit_acceptance.py out.jsonl ...`.

use std::collections::BTreeMap;

use tern::model::{Logits, Scratch};
use tern::speculative::calibration::Prediction;
use tern::speculative::drafter::{Drafter, TreeShape};
use tern::speculative::features::AcceptanceModel;
use tern::speculative::tree::DraftTree;
use tern::{Engine, EngineOptions, Event, Message, Role, Session, SessionOptions, SpeculationOptions};

/// The tree grown at every position.
const SHAPE: TreeShape = TreeShape { max_nodes: 31, max_width: 3, max_depth: 24 };

/// Prompt positions calibrated, and the pass size that computes their rows (a session's
/// defaults).
const CALIBRATED: usize = 2048;
const CHUNK: usize = 32;

#[derive(Default)]
struct Tally {
    positions: usize,
    tree_tokens: usize,
    copy_tokens: usize,
    examples: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(model_path), Some(workloads)) = (args.first(), args.get(1)) else {
        return Err("usage: acceptance_data MODEL WORKLOADS [THREADS]".into());
    };
    let threads = args.get(2).map(|t| t.parse()).transpose()?;
    let engine = Engine::load(model_path, EngineOptions { threads, ..Default::default() })?;
    let acceptance = AcceptanceModel::default();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    // Per task, the answers of its earlier cases, as a history scope would hold them.
    let mut history: BTreeMap<String, Vec<Vec<u32>>> = BTreeMap::new();
    for line in std::fs::read_to_string(workloads)?.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line)?;
        let task = case["task"].as_str().unwrap_or("").to_owned();
        let (prompt, answer) = greedy_answer(&engine, &case)?;
        let mut drafter = Drafter::default();
        let sources = history.entry(task.clone()).or_default();
        drafter.start(sources, &prompt, 0);
        let text = engine.tokenizer().decode(&answer, true);
        sources.push(engine.tokenizer().encode(&text, false, false)?);
        calibrate(&engine, &prompt, &mut drafter)?;

        let tally = tallies.entry(task.clone()).or_default();
        let context: Vec<u32> = prompt.iter().chain(&answer).copied().collect();
        let mut tree = DraftTree::default();
        for i in 0..answer.len().saturating_sub(1) {
            drafter.push(&answer[i..=i]);
            drafter.draft(answer[i], SHAPE, &acceptance, &mut tree);
            // Nodes are in parent-first order: a node's parent is on the answer's path when it
            // is the root or was marked so before it.
            let mut on_path = vec![false; tree.len()];
            on_path[0] = true;
            let mut held = 0;
            for (n, node) in tree.nodes().iter().enumerate().skip(1) {
                if !node.parent.is_some_and(|p| on_path[p]) {
                    continue;
                }
                let taken = answer.get(i + node.depth) == Some(&node.token);
                on_path[n] = taken;
                held = held.max(if taken { node.depth } else { 0 });
                let x: Vec<String> = node.features.0.iter().map(|v| format!("{v}")).collect();
                println!(
                    "{{\"task\":\"{task}\",\"label\":{},\"depth\":{},\"x\":[{}]}}",
                    u8::from(taken),
                    node.depth,
                    x.join(",")
                );
                tally.examples += 1;
            }
            let seen = &context[..prompt.len() + i + 1];
            let rest = &answer[i + 1..];
            let copy = (0..seen.len())
                .map(|p| seen[p..].iter().zip(rest).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            tally.positions += 1;
            tally.tree_tokens += held;
            tally.copy_tokens += copy.min(SHAPE.max_depth);
        }
    }
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

/// The case's prompt tokens and its plain greedy answer.
fn greedy_answer(
    engine: &std::sync::Arc<Engine>,
    case: &serde_json::Value,
) -> Result<(Vec<u32>, Vec<u32>), Box<dyn std::error::Error>> {
    let messages = case["messages"].as_array().ok_or("case without messages")?;
    let last = messages.iter().rposition(|m| m["role"] == "user").ok_or("case without a user message")?;
    let mut system = None;
    let mut earlier = Vec::new();
    for (i, m) in messages.iter().enumerate().take(last) {
        let content = m["content"].as_str().unwrap_or("").to_owned();
        match m["role"].as_str() {
            Some("system") if i == 0 => system = Some(content),
            Some("assistant") => earlier.push(Message::new(Role::Assistant, content)),
            _ => earlier.push(Message::new(Role::User, content)),
        }
    }
    let opts = SessionOptions {
        system_prompt: system,
        max_tokens: case["max_new_tokens"].as_u64().unwrap_or(128) as usize,
        speculation: SpeculationOptions::off(),
        ..Default::default()
    };
    let mut session = Session::new(engine.clone(), opts)?;
    session.set_messages(earlier);
    let mut generation = session.send(messages[last]["content"].as_str().unwrap_or(""))?;
    let prompt = generation.prompt().to_vec();
    let mut answer = Vec::new();
    for event in &mut generation {
        match event? {
            Event::Token { ids, .. } => answer.extend(ids),
            Event::Done(_) => break,
        }
    }
    Ok((prompt, answer))
}

/// The model's predictions at the last [`CALIBRATED`] prompt positions, as a session's prefill
/// records them.
fn calibrate(engine: &Engine, prompt: &[u32], drafter: &mut Drafter) -> Result<(), Box<dyn std::error::Error>> {
    let model = engine.model();
    let mut kv = model.new_kv_cache(prompt.len() + 1);
    let mut scratch = Scratch::default();
    let from = prompt.len().saturating_sub(CALIBRATED + 1);
    model.forward(engine.pool(), &mut kv, &mut scratch, &prompt[..from], Logits::None)?;
    for start in (from..prompt.len()).step_by(CHUNK) {
        let end = (start + CHUNK).min(prompt.len());
        model.forward(engine.pool(), &mut kv, &mut scratch, &prompt[start..end], Logits::All)?;
        for (i, row) in scratch.logits().enumerate() {
            if let Some(&next) = prompt.get(start + i + 1) {
                drafter.calibrate(start + i, Prediction::from_logits(row, next));
            }
        }
    }
    Ok(())
}
