use tern::{Engine, EngineOptions};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let engine = Engine::load(&args[1], EngineOptions::default()).unwrap();
    let g: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    for kind in ["chat", "completions"] {
        for (ci, case) in g[kind].as_array().cloned().unwrap_or_default().iter().enumerate() {
            let ids = |v: &serde_json::Value| -> Vec<u32> { v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect() };
            let prompt = ids(&case["prompt_ids"]);
            let greedy = ids(&case["greedy"]);
            let steps = case["steps"].as_array().unwrap();
            let mut input = prompt.clone();
            input.extend_from_slice(&greedy[..greedy.len() - 1]);
            let first = prompt.len() - 1;
            engine.for_each_logits(&input, |pos, l| {
                if pos < first { return; }
                let j = pos - first;
                let top = steps[j]["top10"].as_array().unwrap();
                let devs: Vec<f64> = top.iter().map(|p| l[p[0].as_u64().unwrap() as usize] as f64 - p[1].as_f64().unwrap()).collect();
                let mean = devs.iter().sum::<f64>() / 10.0;
                let spread = devs.iter().map(|d| (d - mean).abs()).fold(0.0, f64::max);
                println!("{kind}{ci} pos {pos} step {j}: mean dev {mean:+.3} spread {spread:.3}");
            }).unwrap();
        }
    }
}
