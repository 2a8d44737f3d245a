#!/usr/bin/env python3
"""Tern against llama.cpp on the same GGUF files, same thread count, in one run.

Tern: `tern bench --json` (prefill of N prompt tokens, then decode of M tokens).
llama.cpp: the PyPI package llama-cpp-python, timed the same way through its low-level eval:
prefill = one eval of N tokens in a single batch; decode = M evals of one token each.
Prints tokens/s for both and the ratio Tern / llama.cpp (medians of --reps runs).

Install llama.cpp for this CPU first, e.g.
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" pip install llama-cpp-python==0.3.36
"""
import argparse, json, os, random, statistics, subprocess, sys, time

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "gemma-3-270m-q4_k_m.gguf"]


def model_dir():
    return os.environ.get("TERN_MODEL_DIR", os.path.expanduser("~/.cache/tern/models"))


def bench_tern(tern, path, n_prompt, n_gen, threads, reps):
    out = subprocess.run(
        [tern, "bench", "--model", path, "--prompt-tokens", str(n_prompt), "--gen-tokens", str(n_gen),
         "--threads", str(threads), "--repetitions", str(reps), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_llama(path, n_prompt, n_gen, threads, reps):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=n_prompt + n_gen + 8, n_batch=n_prompt, n_ubatch=n_prompt,
                n_threads=threads, n_threads_batch=threads, verbose=False)
    rng = random.Random(0)
    vocab = llm.n_vocab()
    ids = [rng.randrange(1000, min(vocab, 30000)) for _ in range(n_prompt)]
    llm.reset(); llm.eval(ids[:16])  # warm-up
    pp, tg = [], []
    for _ in range(reps):
        llm.reset()
        t = time.perf_counter(); llm.eval(ids); pp.append(n_prompt / (time.perf_counter() - t))
        llm.reset(); llm.eval(ids[:1])
        t = time.perf_counter()
        for i in range(n_gen):
            llm.eval([ids[(i + 1) % n_prompt]])
        tg.append(n_gen / (time.perf_counter() - t))
    return statistics.median(pp), statistics.median(tg)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default="target/release/tern")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("models", nargs="*", default=MODELS)
    a = ap.parse_args()
    rows = []
    for m in a.models:
        path = os.path.join(model_dir(), m)
        t = bench_tern(a.tern, path, a.prompt_tokens, a.gen_tokens, a.threads, a.reps)
        lpp, ltg = bench_llama(path, a.prompt_tokens, a.gen_tokens, a.threads, a.reps)
        rows.append({"model": m, "tern_prefill_tps": t["prefill_tps"], "llama_prefill_tps": lpp,
                     "prefill_ratio": t["prefill_tps"] / lpp, "tern_decode_tps": t["decode_tps"],
                     "llama_decode_tps": ltg, "decode_ratio": t["decode_tps"] / ltg,
                     "tern_load_ms": t["load_ms"], "tern_peak_rss_bytes": t["peak_rss_bytes"]})
        if not a.json:
            r = rows[-1]
            print(f"{m:42} prefill {r['tern_prefill_tps']:7.1f} vs {lpp:7.1f} ({r['prefill_ratio']:.2f}x)   "
                  f"decode {r['tern_decode_tps']:6.1f} vs {ltg:6.1f} ({r['decode_ratio']:.2f}x)", flush=True)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
