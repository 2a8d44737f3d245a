#!/usr/bin/env python3
"""Tern against llama.cpp on the same GGUF files, same thread count, in one run.

One command produces the figures of docs/benchmarks.md (table, chart, machine, date):

  python3 scripts/compare_llama_cpp.py --chart docs/benchmarks.svg --markdown docs/benchmarks-results.md

Tern: `tern bench --json` (built first with `cargo build --release -p tern-cli`).
llama.cpp: the PyPI package llama-cpp-python, timed the same way through its low-level eval, in
its own process: prefill = one eval of N tokens in a single batch (as llama-bench's ppN),
decode = M evals of one token (tgM), decode at depth D = M single-token evals after D tokens.
Each round runs both engines once per model, alternating which goes first, so that load from
other processes falls on both; the figures are medians over rounds. llama.cpp is timed with flash
attention off and on and the faster of the two counts for each test (its strongest setting).

llama.cpp for this CPU, as GUIDE section 7 describes (the AMX path dies with an illegal
instruction in these virtual machines); `--install` runs this when the package is missing:
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON \\
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" pip install llama-cpp-python==0.3.36
"""
import argparse
import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "gemma-3-270m-q4_k_m.gguf"]
LLAMA_CPP_VERSION = "0.3.36"
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON "
              "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF")
# The issue's targets (ratio Tern / llama.cpp, 2 threads): prefill, decode, decode at depth.
TARGETS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": (1.5, 1.5, 1.5),
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": (1.3, 1.1, 1.3),
    "gemma-3-270m-q4_k_m.gguf": (1.2, 1.3, 1.3),
}
BANDWIDTH_GBS = 18.0  # this machine's read bandwidth with 2 threads (GUIDE section 7)
TESTS = [("prefill_tps", "prefill"), ("decode_tps", "decode"), ("decode_at_depth_tps", "depth")]


def model_dir():
    return os.environ.get("TERN_MODEL_DIR", os.path.expanduser("~/.cache/tern/models"))


def ensure_llama_cpp(install):
    try:
        import llama_cpp  # noqa: F401
        return llama_cpp.__version__
    except ImportError:
        if not install:
            sys.exit("llama-cpp-python is not installed; rerun with --install (builds it from its sdist, "
                     "several minutes) or install it as the docstring shows")
    env = dict(os.environ, CMAKE_ARGS=CMAKE_ARGS, FORCE_CMAKE="1")
    subprocess.run([sys.executable, "-m", "pip", "install", f"llama-cpp-python=={LLAMA_CPP_VERSION}"], check=True, env=env)
    import llama_cpp
    return llama_cpp.__version__


def bench_tern(tern, path, a, extra):
    out = subprocess.run(
        [tern, "bench", "--model", path, "--prompt-tokens", str(a.prompt_tokens), "--gen-tokens", str(a.gen_tokens),
         "--depth", str(a.depth), "--threads", str(a.threads), "--repetitions", "1", "--json"] + extra,
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def bench_llama(path, a, flash_attn):
    """Runs in a child process (see --llama-child) so that its peak RSS is its own."""
    out = subprocess.run(
        [sys.executable, __file__, "--llama-child", path, "--prompt-tokens", str(a.prompt_tokens),
         "--gen-tokens", str(a.gen_tokens), "--depth", str(a.depth), "--threads", str(a.threads),
         "--flash-attn", flash_attn],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def llama_child(path, n_prompt, n_gen, depth, threads, flash_attn):
    import resource
    from llama_cpp import Llama
    # The interpreter and the library before any model: reported, to be subtracted.
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ctx = max(n_prompt, n_gen + 1, depth + n_gen) + 1
    t = time.perf_counter()
    llm = Llama(model_path=path, n_ctx=ctx, n_batch=n_prompt, n_ubatch=n_prompt, n_threads=threads,
                n_threads_batch=threads, flash_attn=flash_attn == "on", verbose=False)
    load_ms = (time.perf_counter() - t) * 1e3
    rng = random.Random(0)
    vocab = llm.n_vocab()
    ids = [rng.randrange(1000, min(vocab, 30000)) for _ in range(max(n_prompt, depth))]
    llm.reset()
    llm.eval(ids[:16])  # warm-up: pages the weights in

    def decode(start):
        t = time.perf_counter()
        for i in range(n_gen):
            llm.eval([ids[(start + i) % len(ids)]])
        return n_gen / (time.perf_counter() - t)

    llm.reset()
    t = time.perf_counter()
    llm.eval(ids[:n_prompt])
    pp = n_prompt / (time.perf_counter() - t)
    llm.reset()
    llm.eval(ids[:1])
    tg = decode(1)
    deep = None
    if depth > 0:
        llm.reset()
        for s in range(0, depth, n_prompt):
            llm.eval(ids[s:min(s + n_prompt, depth)])
        deep = decode(depth)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    json.dump({"prefill_tps": pp, "decode_tps": tg, "decode_at_depth_tps": deep, "load_ms": load_ms,
               "peak_rss_bytes": peak, "python_base_rss_bytes": base_rss}, sys.stdout)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def run_model(m, a, tern, extra):
    path = os.path.join(model_dir(), m)
    tern_runs, llama_runs = [], {"off": [], "on": []}
    for r in range(a.rounds):
        jobs = [("tern", None)] + [("llama", fa) for fa in a.llama_flash_attn]
        if r % 2:
            jobs.reverse()
        for engine, fa in jobs:
            if engine == "tern":
                tern_runs.append(bench_tern(tern, path, a, extra))
            else:
                llama_runs[fa].append(bench_llama(path, a, fa))
        print(f"  {m}: round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    t = {k: median([x[k] for x in tern_runs]) for k, _ in TESTS}
    llama = {}
    for k, _ in TESTS:
        per_fa = {fa: median([x[k] for x in runs]) for fa, runs in llama_runs.items() if runs}
        best = max(((v, fa) for fa, v in per_fa.items() if v is not None), default=(None, None))
        llama[k], llama[k + "_fa"] = best
    all_llama = [x for runs in llama_runs.values() for x in runs]
    row = {"model": m, "rounds": a.rounds}
    for k, short in TESTS:
        row[f"tern_{short}_tps"] = t[k]
        row[f"llama_{short}_tps"] = llama[k]
        row[f"llama_{short}_flash_attn"] = llama[k + "_fa"]
        row[f"{short}_ratio"] = t[k] / llama[k] if t[k] and llama[k] else None
    last = tern_runs[-1]
    bytes_per_token = last.get("decode_bytes_per_token")
    row.update({
        "tern_load_ms": median([x["load_ms"] for x in tern_runs]),
        "tern_repack_ms": median([x.get("repack_ms", 0) for x in tern_runs]),
        "llama_load_ms": median([x["load_ms"] for x in all_llama]),
        "tern_peak_rss_bytes": max(x["peak_rss_bytes"] or 0 for x in tern_runs),
        "llama_peak_rss_bytes": max(x["peak_rss_bytes"] for x in all_llama),
        "llama_python_base_rss_bytes": min(x["python_base_rss_bytes"] for x in all_llama),
        "tern_kernels": last["kernels"],
        "decode_bytes_per_token": bytes_per_token,
        "tern_decode_gbs": bytes_per_token * t["decode_tps"] / 1e9 if bytes_per_token and t["decode_tps"] else None,
    })
    row["llama_model_rss_bytes"] = row["llama_peak_rss_bytes"] - row["llama_python_base_rss_bytes"]
    return row


def fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def mib(b):
    return "-" if not b else f"{b / 2**20:.0f} MiB"


def check_targets(r, threads):
    """(label, met) pairs for the issue's targets that apply to this row."""
    out = []
    want = TARGETS.get(r["model"])
    if want and threads == 2:
        for (k, short), need in zip(TESTS, want):
            v = r.get(f"{short}_ratio")
            out.append((f"{short} ≥ {need}×", v is not None and v >= need))
        out.append(("peak RSS ≤ llama.cpp", r["tern_peak_rss_bytes"] <= r["llama_model_rss_bytes"]))
        if r["model"].startswith("qwen") and r.get("tern_decode_gbs"):
            out.append((f"decode ≥ 95% of {BANDWIDTH_GBS:.0f} GB/s", r["tern_decode_gbs"] >= 0.95 * BANDWIDTH_GBS))
        if r["model"].startswith("SmolLM2"):
            out.append(("load < 100 ms", r["tern_load_ms"] < 100))
    return out


def print_row(r, a):
    print(f"{r['model']}  (Tern kernels: {r['tern_kernels']}, medians of {r['rounds']} rounds)")
    for k, short in TESTS:
        label = {"prefill": f"prefill pp{a.prompt_tokens}", "decode": f"decode  tg{a.gen_tokens}",
                 "depth": f"decode @ d{a.depth}"}[short]
        fa = r[f"llama_{short}_flash_attn"]
        print(f"  {label:<16} {fmt(r[f'tern_{short}_tps']):>8} vs {fmt(r[f'llama_{short}_tps']):>8} t/s  "
              f"{fmt(r[f'{short}_ratio'], '.2f')}x  (llama.cpp flash attention {fa})")
    gbs = f", Tern decode reads {fmt(r['tern_decode_gbs'])} GB/s" if r["tern_decode_gbs"] else ""
    print(f"  load {fmt(r['tern_load_ms'], '.0f')} ms (repacking {fmt(r['tern_repack_ms'], '.0f')}) vs "
          f"{fmt(r['llama_load_ms'], '.0f')} ms; peak RSS {mib(r['tern_peak_rss_bytes'])} vs "
          f"{mib(r['llama_model_rss_bytes'])} (llama.cpp's process {mib(r['llama_peak_rss_bytes'])} less "
          f"{mib(r['llama_python_base_rss_bytes'])} of Python){gbs}")
    for label, met in check_targets(r, a.threads):
        print(f"    target {label}: {'met' if met else 'NOT met'}")
    sys.stdout.flush()


def machine():
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
        cpu = next(l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name"))
        flags = next(l for l in info.splitlines() if l.startswith("flags")).split()
        isa = [x for x in ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8") if x in flags]
        cpu += f", {os.cpu_count()} cores, " + "/".join(isa)
    except (OSError, StopIteration):
        pass
    return f"{cpu}; {platform.system()} {platform.release()}"


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(rows, a, meta):
    lines = [f"Machine: {meta['machine']}. Date: {meta['date']}. Tern {meta['commit']}, llama-cpp-python "
             f"{meta['llama_cpp']}. {a.threads} threads, medians of {a.rounds} rounds.", "",
             f"Command: `{meta['command']}`", "",
             f"| model | test | Tern t/s | llama.cpp t/s | ratio |", "|---|---|---|---|---|"]
    for r in rows:
        name = r["model"].split(".gguf")[0]
        for k, short in TESTS:
            test = {"prefill": f"pp{a.prompt_tokens}", "decode": f"tg{a.gen_tokens}",
                    "depth": f"tg{a.gen_tokens} @ d{a.depth}"}[short]
            lines.append(f"| {name} | {test} | {fmt(r[f'tern_{short}_tps'])} | {fmt(r[f'llama_{short}_tps'])} "
                         f"(FA {r[f'llama_{short}_flash_attn']}) | {fmt(r[f'{short}_ratio'], '.2f')}× |")
    lines += ["", "| model | Tern load | llama.cpp load | Tern peak RSS | llama.cpp peak RSS (less Python) | Tern decode GB/s |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model'].split('.gguf')[0]} | {fmt(r['tern_load_ms'], '.0f')} ms | "
                     f"{fmt(r['llama_load_ms'], '.0f')} ms | {mib(r['tern_peak_rss_bytes'])} | "
                     f"{mib(r['llama_model_rss_bytes'])} | {fmt(r['tern_decode_gbs'])} |")
    return "\n".join(lines) + "\n"


def svg_chart(rows, title, subtitle, path):
    """Grouped bars of the ratio Tern / llama.cpp per model and test, with the parity line."""
    colors = ["#4e79a7", "#f28e2b", "#59a14f"]
    w, h, left, top, bottom = 760, 380, 60, 56, 80
    group_w = (w - left - 20) / max(len(rows), 1)
    bar_w = group_w / (len(TESTS) + 1)
    vmax = max([2.0] + [r[f"{s}_ratio"] for r in rows for _, s in TESTS if r.get(f"{s}_ratio")])
    y = lambda v: top + (h - top - bottom) * (1 - v / vmax)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="#fff"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<text x="{w / 2}" y="38" text-anchor="middle" font-size="10" fill="#555">{subtitle}</text>']
    for i in range(int(vmax * 2) + 1):
        v = i / 2
        out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
                   f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.1f}x</text>')
    out.append(f'<line x1="{left}" x2="{w - 20}" y1="{y(1):.1f}" y2="{y(1):.1f}" stroke="#000" stroke-dasharray="4 3"/>')
    for gi, r in enumerate(rows):
        x0 = left + gi * group_w + bar_w / 2
        for ti, (_, short) in enumerate(TESTS):
            v = r.get(f"{short}_ratio")
            if not v:
                continue
            x = x0 + ti * bar_w
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar_w * 0.9:.1f}" height="{y(0) - y(v):.1f}" fill="{colors[ti]}"/>'
                       f'<text x="{x + bar_w * 0.45:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle" font-size="10">{v:.2f}</text>')
        name = r["model"].split(".gguf")[0]
        out.append(f'<text x="{left + gi * group_w + group_w / 2:.1f}" y="{h - bottom + 18}" text-anchor="middle">{name}</text>')
    for ti, (_, short) in enumerate(TESTS):
        label = {"prefill": "prefill pp512", "decode": "decode tg128", "depth": "decode at depth 1536"}[short]
        out.append(f'<rect x="{left + ti * 200}" y="{h - 30}" width="12" height="12" fill="{colors[ti]}"/>'
                   f'<text x="{left + ti * 200 + 18}" y="{h - 20}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default="target/release/tern")
    ap.add_argument("--no-build", action="store_true", help="use --tern as it is (default: cargo build it first)")
    ap.add_argument("--install", action="store_true", help="pip-install llama-cpp-python for this CPU if missing")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--depth", type=int, default=1536, help="context depth of the long-context decode test")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="runs of each engine per model (medians are reported)")
    ap.add_argument("--llama-flash-attn", default="off,on", help="llama.cpp settings to time; the faster counts")
    ap.add_argument("--tern-args", default="", help="extra `tern bench` arguments, e.g. '--kv int8-fp8'")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    ap.add_argument("--chart", help="write an SVG chart of the ratios to this path")
    ap.add_argument("--markdown", help="write the result tables (with machine, date, command) to this path")
    ap.add_argument("--llama-child", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("--flash-attn", default="off", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*", default=MODELS)
    a = ap.parse_args()
    if a.llama_child:
        return llama_child(a.llama_child, a.prompt_tokens, a.gen_tokens, a.depth, a.threads, a.flash_attn)
    a.llama_flash_attn = [x.strip() for x in a.llama_flash_attn.split(",") if x.strip() in ("off", "on")]
    version = ensure_llama_cpp(a.install)
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "tern-cli"], check=True)
    meta = {"machine": machine(), "date": datetime.date.today().isoformat(), "commit": git_commit(),
            "llama_cpp": version, "command": "python3 " + " ".join(sys.argv)}
    print(f"{meta['machine']}\n{meta['date']}, Tern {meta['commit']}, llama-cpp-python {version}, "
          f"{a.threads} threads\n", flush=True)
    rows = []
    for m in a.models:
        rows.append(run_model(m, a, a.tern, a.tern_args.split()))
        print_row(rows[-1], a)
    if a.chart:
        svg_chart(rows, f"Tern / llama.cpp, {a.threads} threads (higher is better)",
                  f"{meta['machine']}, {meta['date']}", a.chart)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(rows, a, meta))
    if a.json:
        json.dump({"meta": meta, "rows": rows}, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
