//! Writes the Rust session's greedy answer to each prompt of a prompts file, for the Kotlin and
//! Swift suites to compare their streamed text with.
//!
//! usage: reference_answers MODEL PROMPTS.tsv OUT_DIR
//! PROMPTS.tsv: `max_tokens<TAB>prompt` lines (`#` starts a comment). OUT_DIR/<n>.txt gets the
//! answer to the n-th prompt (from 0), exactly as streamed.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, prompts, out] = args.as_slice() else {
        eprintln!("usage: reference_answers MODEL PROMPTS.tsv OUT_DIR");
        return ExitCode::from(2);
    };
    match run(model, prompts, out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reference_answers: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(model: &str, prompts: &str, out: &str) -> Result<(), Box<dyn std::error::Error>> {
    // One thread, as the Kotlin and Swift suites use (the answer does not depend on it).
    let engine = tern::Engine::load(model, tern::EngineOptions { threads: Some(1), ..Default::default() })?;
    std::fs::create_dir_all(out)?;
    let text = std::fs::read_to_string(prompts)?;
    let cases = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    for (n, line) in cases.enumerate() {
        let (max_tokens, prompt) = line.split_once('\t').ok_or("a prompt line is `max_tokens<TAB>prompt`")?;
        let opts = tern::SessionOptions {
            sampling: Some(tern::SamplingOptions::greedy()),
            max_tokens: max_tokens.parse()?,
            ..Default::default()
        };
        let mut session = tern::Session::new(engine.clone(), opts)?;
        let mut answer = String::new();
        for event in session.send(prompt)? {
            if let tern::Event::Token { text, .. } = event? {
                answer.push_str(&text);
            }
        }
        std::fs::write(format!("{out}/{n}.txt"), &answer)?;
        eprintln!("reference {n}: {} bytes", answer.len());
    }
    Ok(())
}
