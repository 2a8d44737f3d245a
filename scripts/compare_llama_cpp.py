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


def bench_tern(tern, path, n_prompt, n_gen, depth, threads, reps):
    out = subprocess.run(
        [tern, "bench", "--model", path, "--prompt-tokens", str(n_prompt), "--gen-tokens", str(n_gen),
         "--depth", str(depth), "--threads", str(threads), "--repetitions", str(reps), "--json"],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_llama(path, n_prompt, n_gen, depth, threads, reps):
    """Runs in a child process (see --llama-child) so its peak RSS is its own."""
    out = subprocess.run(
        [sys.executable, __file__, "--llama-child", path, "--prompt-tokens", str(n_prompt),
         "--gen-tokens", str(n_gen), "--depth", str(depth), "--threads", str(threads), "--reps", str(reps)],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def llama_child(path, n_prompt, n_gen, depth, threads, reps):
    import resource
    from llama_cpp import Llama
    # The interpreter and the library before any model: subtracted from the peak below.
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ctx = max(n_prompt, n_gen + 1, depth + n_gen) + 1
    t = time.perf_counter()
    llm = Llama(model_path=path, n_ctx=ctx, n_batch=n_prompt, n_ubatch=n_prompt,
                n_threads=threads, n_threads_batch=threads, verbose=False)
    load_ms = (time.perf_counter() - t) * 1e3
    rng = random.Random(0)
    vocab = llm.n_vocab()
    ids = [rng.randrange(1000, min(vocab, 30000)) for _ in range(max(n_prompt, depth))]
    llm.reset(); llm.eval(ids[:16])  # warm-up
    pp, tg, deep = [], [], []

    def decode(start):
        t = time.perf_counter()
        for i in range(n_gen):
            llm.eval([ids[(start + i) % len(ids)]])
        return n_gen / (time.perf_counter() - t)

    for _ in range(reps):
        llm.reset()
        t = time.perf_counter(); llm.eval(ids[:n_prompt]); pp.append(n_prompt / (time.perf_counter() - t))
        llm.reset(); llm.eval(ids[:1])
        tg.append(decode(1))
        if depth > 0:
            llm.reset()
            for s in range(0, depth, n_prompt):
                llm.eval(ids[s:min(s + n_prompt, depth)])
            deep.append(decode(depth))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    med = lambda xs: statistics.median(xs) if xs else None
    json.dump({"prefill_tps": med(pp), "decode_tps": med(tg), "decode_at_depth_tps": med(deep),
               "load_ms": load_ms, "peak_rss_bytes": peak, "python_base_rss_bytes": base_rss}, sys.stdout)


def svg_chart(rows, title, path):
    """Grouped bars of the ratio Tern / llama.cpp per model and test, with the parity line."""
    tests = [("prefill_ratio", "prefill pp"), ("decode_ratio", "decode tg"), ("depth_ratio", "decode at depth")]
    colors = ["#4e79a7", "#f28e2b", "#59a14f"]
    w, h, left, top, bottom = 760, 360, 60, 40, 80
    group_w = (w - left - 20) / max(len(rows), 1)
    bar_w = group_w / (len(tests) + 1)
    vmax = max([2.0] + [r[k] for r in rows for k, _ in tests if r.get(k)])
    y = lambda v: top + (h - top - bottom) * (1 - v / vmax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for i in range(int(vmax * 2) + 1):
        v = i / 2
        out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}x</text>')
    out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#000" stroke-dasharray="4 3"/>')
    for gi, r in enumerate(rows):
        x0 = left + gi * group_w + bar_w / 2
        for ti, (k, _) in enumerate(tests):
            v = r.get(k)
            if not v:
                continue
            x = x0 + ti * bar_w
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar_w * 0.9:.1f}" height="{y(0) - y(v):.1f}" fill="{colors[ti]}"/>'
                       f'<text x="{x + bar_w * 0.45:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle" font-size="10">{v:.2f}</text>')
        name = r["model"].split(".gguf")[0]
        out.append(f'<text x="{left + gi * group_w + group_w / 2:.1f}" y="{h - bottom + 18}" text-anchor="middle">{name}</text>')
    for ti, (_, label) in enumerate(tests):
        out.append(f'<rect x="{left + ti * 170}" y="{h - 30}" width="12" height="12" fill="{colors[ti]}"/>'
                   f'<text x="{left + ti * 170 + 18}" y="{h - 20}">{label} (Tern / llama.cpp)</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default="target/release/tern")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--depth", type=int, default=1536, help="context depth of the long-context decode test")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--chart", help="write an SVG chart of the ratios to this path")
    ap.add_argument("--llama-child", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*", default=MODELS)
    a = ap.parse_args()
    if a.llama_child:
        return llama_child(a.llama_child, a.prompt_tokens, a.gen_tokens, a.depth, a.threads, a.reps)
    rows = []
    for m in a.models:
        path = os.path.join(model_dir(), m)
        t = bench_tern(a.tern, path, a.prompt_tokens, a.gen_tokens, a.depth, a.threads, a.reps)
        l = bench_llama(path, a.prompt_tokens, a.gen_tokens, a.depth, a.threads, a.reps)
        ratio = lambda k: t[k] / l[k] if t.get(k) and l.get(k) else None
        r = {"model": m,
             "tern_prefill_tps": t["prefill_tps"], "llama_prefill_tps": l["prefill_tps"], "prefill_ratio": ratio("prefill_tps"),
             "tern_decode_tps": t["decode_tps"], "llama_decode_tps": l["decode_tps"], "decode_ratio": ratio("decode_tps"),
             "depth": a.depth, "tern_depth_tps": t.get("decode_at_depth_tps"), "llama_depth_tps": l["decode_at_depth_tps"],
             "depth_ratio": ratio("decode_at_depth_tps"),
             "tern_load_ms": t["load_ms"], "llama_load_ms": l["load_ms"],
             "tern_peak_rss_bytes": t["peak_rss_bytes"], "llama_peak_rss_bytes": l["peak_rss_bytes"],
             "llama_python_base_rss_bytes": l["python_base_rss_bytes"]}
        rows.append(r)
        if not a.json:
            fmt = lambda x: "-" if x is None else f"{x:.1f}"
            rx = lambda x: "-" if x is None else f"{x:.2f}x"
            mb = lambda b: f"{b / 2**20:.0f} MiB" if b else "-"
            print(f"{m}\n"
                  f"  prefill pp{a.prompt_tokens:<5} {fmt(r['tern_prefill_tps']):>8} vs {fmt(r['llama_prefill_tps']):>8} t/s  {rx(r['prefill_ratio'])}\n"
                  f"  decode  tg{a.gen_tokens:<5} {fmt(r['tern_decode_tps']):>8} vs {fmt(r['llama_decode_tps']):>8} t/s  {rx(r['decode_ratio'])}\n"
                  f"  decode @ d{a.depth:<4} {fmt(r['tern_depth_tps']):>8} vs {fmt(r['llama_depth_tps']):>8} t/s  {rx(r['depth_ratio'])}\n"
                  f"  load {r['tern_load_ms']:.0f} vs {r['llama_load_ms']:.0f} ms; peak RSS {mb(r['tern_peak_rss_bytes'])} vs "
                  f"{mb(r['llama_peak_rss_bytes'])} (of which Python and the library {mb(r['llama_python_base_rss_bytes'])})",
                  flush=True)
    if a.chart:
        svg_chart(rows, f"Tern / llama.cpp, {a.threads} threads (higher is better)", a.chart)
    if a.json:
        json.dump(rows, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
