//! Prints a GGUF file's metadata and tensor table: `cargo run --example gguf_dump -- FILE`.
use tern::gguf::{GgufFile, Value};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: gguf_dump FILE")?;
    let f = GgufFile::open(&path)?;
    println!("GGUF v{} alignment {}", f.version(), f.alignment());
    for (k, v) in f.metadata() {
        match v {
            Value::Array(a) => {
                let head: Vec<String> = match a.strings(f.bytes()) {
                    Some(it) => it.take(5).map(|s| format!("{s:?}")).collect(),
                    None => a.to_f32_vec(f.bytes()).unwrap_or_default().iter().take(5).map(|x| x.to_string()).collect(),
                };
                println!("{k} = [{} x {}] {}", a.len, a.elem.name(), head.join(", "))
            }
            Value::String(s) if s.len() > 200 => {
                println!("{k} = {:?}...", &s[..s.char_indices().nth(200).map_or(s.len(), |c| c.0)])
            }
            v => println!("{k} = {v:?}"),
        }
    }
    for t in f.tensors() {
        println!("{:40} {:6} {:?}", t.name, t.ty.name(), t.dims);
    }
    Ok(())
}
