#!/usr/bin/env python3
"""Tern against llama.cpp and ik_llama.cpp on the same GGUF files, same thread count, in one run.

One command produces the figures of docs/benchmarks.md (tables, charts, machine, date, load):

  python3 scripts/compare_llama_cpp.py --install --chart docs/benchmarks.svg \\
      --ik-chart docs/benchmarks-ik.svg --results benchmarks/results

Tern: `tern bench --json` (built first with `cargo build --release -p tern-cli -p tern-lab`).
llama.cpp: the PyPI package llama-cpp-python, timed the same way through its low-level eval, in
its own process: prefill = one eval of N tokens in a single batch (as llama-bench's ppN),
decode = M evals of one token (tgM), decode at depth D = M single-token evals after D tokens.
ik_llama.cpp: its own llama-bench (pp N, tg M, -gp D,M), built from the ik-llama-cpp-python sdist
for this CPU, with weights repacked at load (-rtr 1). Each peer is timed with flash attention off
and on and the faster of the two counts for each test (its strongest setting).
Each round runs every engine once per model, alternating the order, so that load from other
processes falls on all; the figures are medians over rounds. Each round also runs
`tern-lab bandwidth` (a plain read over 1 GiB with the same threads), so that decode is reported
as the bytes a token reads × tokens/s against what the machine's memory gives at that moment.

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
IK_LLAMA_VERSION = "0.1.5"
# ik_llama.cpp for this CPU as it is (its AVX-512 paths, its own matrix products); no AMX here.
IK_CMAKE_ARGS = "-DGGML_NATIVE=ON -DGGML_IQK_FA_ALL_QUANTS=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF"
# Targets (ratio Tern / llama.cpp, 2 threads): prefill, decode, decode at depth.
TARGETS = {
    "SmolLM2-135M-Instruct.Q4_1.gguf": (1.5, 1.5, 1.5),
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": (1.3, 1.1, 1.3),
    "gemma-3-270m-q4_k_m.gguf": (1.2, 1.3, 1.3),
}
# Against ik_llama.cpp, every model: prefill, decode, decode at depth.
IK_TARGETS = (1.3, 1.05, 1.1)
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


def ik_cache_dir():
    return os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "tern",
                        f"ik_llama.cpp-{IK_LLAMA_VERSION}")


def ensure_ik_llama(install):
    """ik_llama.cpp's llama-bench, built from the ik-llama-cpp-python sdist for this CPU.

    The sdist has no .git and lacks common/cmake/build-info-gen-cpp.cmake, which the build runs to
    write common/build-info.cpp; writing that file first (newer than its template) skips the step.
    """
    root = ik_cache_dir()
    binary = os.path.join(root, "build", "bin", "llama-bench")
    if os.path.exists(binary):
        return binary
    if not install:
        sys.exit(f"ik_llama.cpp's llama-bench is not built at {binary}; rerun with --install "
                 "(downloads the ik-llama-cpp-python sdist and builds it, about 15 minutes on 2 cores)")
    os.makedirs(root, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "ik-llama-cpp-python",
                    f"ik-llama-cpp-python=={IK_LLAMA_VERSION}", "-d", root], check=True)
    sdist = os.path.join(root, f"ik_llama_cpp_python-{IK_LLAMA_VERSION}.tar.gz")
    subprocess.run(["tar", "xzf", sdist, "-C", root], check=True)
    src = os.path.join(root, f"ik_llama_cpp_python-{IK_LLAMA_VERSION}", "vendor", "ik_llama.cpp")
    with open(os.path.join(src, "common", "build-info.cpp"), "w") as f:
        f.write(f'int LLAMA_BUILD_NUMBER = 0;\nchar const *LLAMA_COMMIT = "sdist-{IK_LLAMA_VERSION}";\n'
                'char const *LLAMA_COMPILER = "cc";\nchar const *LLAMA_BUILD_TARGET = "native";\n')
    build = os.path.join(root, "build")
    subprocess.run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release"] + IK_CMAKE_ARGS.split(),
                   check=True)
    subprocess.run(["cmake", "--build", build, "--target", "llama-bench", "-j", str(os.cpu_count() or 2)],
                   check=True)
    return binary


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


def bench_ik(binary, path, a):
    """ik_llama.cpp's llama-bench with its fastest options: weights repacked at load (-rtr 1), flash
    attention off and on in one process; -gp times the generation after a prompt of the given depth."""
    cmd = [binary, "-m", path, "-t", str(a.threads), "-p", str(a.prompt_tokens), "-n", str(a.gen_tokens),
           "-fa", "0,1", "-rtr", "1", "-r", "1", "-w", "1", "-o", "json"]
    if a.depth > 0:
        cmd += ["-gp", f"{a.depth},{a.gen_tokens}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"ik_llama.cpp's llama-bench failed on {path} (status {status})")
    per_fa = {}
    for t in json.loads(out):
        r = per_fa.setdefault("on" if t.get("flash_attn") else "off", {"peak_rss_bytes": usage.ru_maxrss * 1024})
        key = ("prefill_tps" if t["n_gen"] == 0 else "decode_tps" if t["n_prompt"] == 0 else "decode_at_depth_tps")
        r[key] = t["avg_ts"]
    return per_fa


def bandwidth_probe(lab, threads):
    out = subprocess.run([lab, "bandwidth", "--threads", str(threads), "--passes", "5", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["median_gbs"]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def best_of(runs_per_fa, key):
    """The faster flash-attention setting's median: (tokens/s, setting)."""
    per_fa = {fa: median([x.get(key) for x in runs]) for fa, runs in runs_per_fa.items() if runs}
    return max(((v, fa) for fa, v in per_fa.items() if v is not None), default=(None, None))


def run_model(m, a, tern, extra):
    path = os.path.join(model_dir(), m)
    tern_runs, probes = [], []
    peer_runs = {p: {"off": [], "on": []} for p in a.peers}
    for r in range(a.rounds):
        jobs = (["probe", "tern"] + ([("llama", fa) for fa in a.llama_flash_attn] if "llama" in a.peers else [])
                + (["ik"] if "ik" in a.peers else []))
        if r % 2:
            jobs.reverse()
        for job in jobs:
            if job == "probe":
                probes.append(bandwidth_probe(a.lab, a.threads))
            elif job == "tern":
                tern_runs.append(bench_tern(tern, path, a, extra))
            elif job == "ik":
                for fa, run in bench_ik(a.ik_binary, path, a).items():
                    peer_runs["ik"][fa].append(run)
            else:
                peer_runs["llama"][job[1]].append(bench_llama(path, a, job[1]))
        print(f"  {m}: round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    t = {k: median([x[k] for x in tern_runs]) for k, _ in TESTS}
    row = {"model": m, "rounds": a.rounds}
    for peer, runs in peer_runs.items():
        for k, short in TESTS:
            v, fa = best_of(runs, k)
            row[f"{peer}_{short}_tps"], row[f"{peer}_{short}_flash_attn"] = v, fa
            row[f"{peer}_{short}_ratio"] = t[k] / v if t[k] and v else None
        all_runs = [x for xs in runs.values() for x in xs]
        row[f"{peer}_peak_rss_bytes"] = max(x["peak_rss_bytes"] for x in all_runs)
    for k, short in TESTS:
        row[f"tern_{short}_tps"] = t[k]
    last = tern_runs[-1]
    bytes_per_token = last.get("decode_bytes_per_token")
    row.update({
        "tern_load_ms": median([x["load_ms"] for x in tern_runs]),
        "tern_repack_ms": median([x.get("repack_ms", 0) for x in tern_runs]),
        "tern_peak_rss_bytes": max(x["peak_rss_bytes"] or 0 for x in tern_runs),
        "tern_kernels": last["kernels"],
        "decode_bytes_per_token": bytes_per_token,
        "tern_decode_gbs": bytes_per_token * t["decode_tps"] / 1e9 if bytes_per_token and t["decode_tps"] else None,
        "probe_gbs": median(probes),
        "probe_gbs_range": [min(probes), max(probes)],
    })
    if "llama" in peer_runs:
        llama_all = [x for xs in peer_runs["llama"].values() for x in xs]
        row["llama_load_ms"] = median([x["load_ms"] for x in llama_all])
        row["llama_python_base_rss_bytes"] = min(x["python_base_rss_bytes"] for x in llama_all)
        row["llama_model_rss_bytes"] = row["llama_peak_rss_bytes"] - row["llama_python_base_rss_bytes"]
    if row["tern_decode_gbs"] and row["probe_gbs"]:
        row["tern_decode_share_of_probe"] = row["tern_decode_gbs"] / row["probe_gbs"]
    return row


def fmt(x, spec=".1f", none="-"):
    return none if x is None else format(x, spec)


def mib(b):
    return "-" if not b else f"{b / 2**20:.0f} MiB"


PEER_NAMES = {"llama": "llama.cpp", "ik": "ik_llama.cpp"}


def check_targets(r, threads):
    """(label, met) pairs for the targets that apply to this row (2 threads only)."""
    out = []
    if threads != 2:
        return out
    want = TARGETS.get(r["model"])
    if want and r.get("llama_decode_ratio") is not None:
        for (k, short), need in zip(TESTS, want):
            v = r.get(f"llama_{short}_ratio")
            out.append((f"{short} ≥ {need}× llama.cpp", v is not None and v >= need))
        out.append(("peak RSS ≤ llama.cpp", r["tern_peak_rss_bytes"] <= r["llama_model_rss_bytes"]))
        if r["model"].startswith("SmolLM2"):
            out.append(("load < 100 ms", r["tern_load_ms"] < 100))
    if r.get("ik_decode_ratio") is not None:
        for (k, short), need in zip(TESTS, IK_TARGETS):
            v = r.get(f"ik_{short}_ratio")
            out.append((f"{short} ≥ {need}× ik_llama.cpp", v is not None and v >= need))
        share = r.get("tern_decode_share_of_probe")
        if not r["model"].startswith("SmolLM2") and share is not None:
            out.append(("decode ≥ 90% of the bandwidth probe", share >= 0.9))
    return out


def test_label(short, a):
    return {"prefill": f"pp{a.prompt_tokens}", "decode": f"tg{a.gen_tokens}",
            "depth": f"tg{a.gen_tokens} @ d{a.depth}"}[short]


def print_row(r, a):
    print(f"{r['model']}  (Tern kernels: {r['tern_kernels']}, medians of {r['rounds']} rounds)")
    for k, short in TESTS:
        line = f"  {test_label(short, a):<16} Tern {fmt(r[f'tern_{short}_tps']):>8} t/s"
        for peer in a.peers:
            line += (f" | {PEER_NAMES[peer]} {fmt(r[f'{peer}_{short}_tps'])} (FA {r[f'{peer}_{short}_flash_attn']})"
                     f" {fmt(r[f'{peer}_{short}_ratio'], '.2f')}x")
        print(line)
    share = r.get("tern_decode_share_of_probe")
    print(f"  bandwidth probe {fmt(r['probe_gbs'])} GB/s (range {fmt(r['probe_gbs_range'][0])}-"
          f"{fmt(r['probe_gbs_range'][1])}); Tern decode reads {fmt(r['tern_decode_gbs'])} GB/s"
          f" = {fmt(share and share * 100, '.0f')}% of it")
    rss = f"  load {fmt(r['tern_load_ms'], '.0f')} ms (repacking {fmt(r['tern_repack_ms'], '.0f')}); peak RSS Tern {mib(r['tern_peak_rss_bytes'])}"
    if "llama" in a.peers:
        rss += (f", llama.cpp {mib(r['llama_model_rss_bytes'])} (its process less {mib(r['llama_python_base_rss_bytes'])}"
                f" of Python; load {fmt(r['llama_load_ms'], '.0f')} ms)")
    if "ik" in a.peers:
        rss += f", ik_llama.cpp {mib(r['ik_peak_rss_bytes'])} (llama-bench's process)"
    print(rss)
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
    peers = [PEER_NAMES[p] for p in a.peers]
    lines = [f"Machine: {meta['machine']}. Date: {meta['date']}. Tern {meta['commit']}; "
             + ", ".join(f"{PEER_NAMES[p]} {meta['versions'][p]}" for p in a.peers)
             + f". {a.threads} threads, medians of {a.rounds} rounds; load average {meta['load_before']} before the run.",
             "", f"Command: `{meta['command']}`", "",
             "| model | test | Tern t/s | " + " | ".join(f"{p} t/s | ratio" for p in peers) + " |",
             "|---|---|---|" + "---|---|" * len(peers)]
    for r in rows:
        name = r["model"].split(".gguf")[0]
        for k, short in TESTS:
            cells = [f"{fmt(r[f'{p}_{short}_tps'])} (FA {r[f'{p}_{short}_flash_attn']}) | "
                     f"{fmt(r[f'{p}_{short}_ratio'], '.2f')}×" for p in a.peers]
            lines.append(f"| {name} | {test_label(short, a)} | {fmt(r[f'tern_{short}_tps'])} | " + " | ".join(cells) + " |")
    lines += ["", "| model | bandwidth probe GB/s (range) | Tern decode reads GB/s | share | Tern load | Tern peak RSS | "
              + " | ".join(f"{p} peak RSS" for p in peers) + " |", "|---|---|---|---|---|---|" + "---|" * len(peers)]
    for r in rows:
        share = r.get("tern_decode_share_of_probe")
        rss = [mib(r["llama_model_rss_bytes"]) + " (less Python)" if p == "llama" else mib(r[f"{p}_peak_rss_bytes"])
               for p in a.peers]
        lines.append(f"| {r['model'].split('.gguf')[0]} | {fmt(r['probe_gbs'])} ({fmt(r['probe_gbs_range'][0])}–"
                     f"{fmt(r['probe_gbs_range'][1])}) | {fmt(r['tern_decode_gbs'])} | {fmt(share and share * 100, '.0f')}% | "
                     f"{fmt(r['tern_load_ms'], '.0f')} ms | {mib(r['tern_peak_rss_bytes'])} | " + " | ".join(rss) + " |")
    lines += [""] + [f"- {r['model'].split('.gguf')[0]}: target {label}: {'met' if met else 'NOT met'}"
                     for r in rows for label, met in check_targets(r, a.threads)]
    return "\n".join(lines) + "\n"


def svg_chart(rows, peer, title, subtitle, path):
    """Grouped bars of the ratio Tern / peer per model and test, with the parity line."""
    colors = ["#4e79a7", "#f28e2b", "#59a14f"]
    w, h, left, top, bottom = 760, 380, 60, 56, 80
    group_w = (w - left - 20) / max(len(rows), 1)
    bar_w = group_w / (len(TESTS) + 1)
    vmax = max([2.0] + [r[f"{peer}_{s}_ratio"] for r in rows for _, s in TESTS if r.get(f"{peer}_{s}_ratio")])
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
            v = r.get(f"{peer}_{short}_ratio")
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


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tern", default="target/release/tern")
    ap.add_argument("--lab", default="target/release/tern-lab", help="tern-lab, for the bandwidth probe")
    ap.add_argument("--no-build", action="store_true", help="use --tern and --lab as they are (default: cargo build them first)")
    ap.add_argument("--install", action="store_true", help="install or build the peers for this CPU if missing")
    ap.add_argument("--peers", default="llama,ik", help="engines to time beside Tern: llama (llama.cpp), ik (ik_llama.cpp)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--depth", type=int, default=1536, help="context depth of the long-context decode test")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5, help="runs of each engine per model (medians are reported)")
    ap.add_argument("--llama-flash-attn", default="off,on", help="llama.cpp settings to time; the faster counts")
    ap.add_argument("--tern-args", default="", help="extra `tern bench` arguments, e.g. '--kv int8-fp8'")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON at the end")
    ap.add_argument("--chart", help="write an SVG chart of the ratios to llama.cpp to this path")
    ap.add_argument("--ik-chart", help="write an SVG chart of the ratios to ik_llama.cpp to this path")
    ap.add_argument("--markdown", help="write the result tables (with machine, date, command) to this path")
    ap.add_argument("--results", metavar="DIR", help="write DIR/<date>-<host>.md and .json")
    ap.add_argument("--llama-child", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("--flash-attn", default="off", help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*", default=MODELS)
    a = ap.parse_args()
    if a.llama_child:
        return llama_child(a.llama_child, a.prompt_tokens, a.gen_tokens, a.depth, a.threads, a.flash_attn)
    a.llama_flash_attn = [x.strip() for x in a.llama_flash_attn.split(",") if x.strip() in ("off", "on")]
    a.peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    if not a.peers or any(p not in PEER_NAMES for p in a.peers):
        ap.error("--peers takes llama and/or ik")
    load_before = load_average()
    versions = {}
    if "llama" in a.peers:
        versions["llama"] = "llama-cpp-python " + ensure_llama_cpp(a.install)
    if "ik" in a.peers:
        a.ik_binary = ensure_ik_llama(a.install)
        versions["ik"] = f"ik-llama-cpp-python {IK_LLAMA_VERSION} (llama-bench -rtr 1)"
    if not a.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "tern-cli", "-p", "tern-lab"], check=True)
    meta = {"machine": machine(), "date": datetime.date.today().isoformat(), "commit": git_commit(),
            "versions": versions, "load_before": fmt(load_before, ".2f"),
            "command": "python3 " + " ".join(sys.argv)}
    print(f"{meta['machine']}\n{meta['date']}, Tern {meta['commit']}, " + ", ".join(versions.values())
          + f", {a.threads} threads, load average {meta['load_before']}\n", flush=True)
    rows = []
    for m in a.models:
        rows.append(run_model(m, a, a.tern, a.tern_args.split()))
        print_row(rows[-1], a)
    subtitle = f"{meta['machine']}, {meta['date']}"
    for peer, path in (("llama", a.chart), ("ik", a.ik_chart)):
        if path and peer in a.peers:
            svg_chart(rows, peer, f"Tern / {PEER_NAMES[peer]}, {a.threads} threads (higher is better)", subtitle, path)
    text = markdown(rows, a, meta)
    paths = [a.markdown] if a.markdown else []
    if a.results:
        os.makedirs(a.results, exist_ok=True)
        stem = os.path.join(a.results, f"{meta['date']}-{platform.node() or 'machine'}")
        paths.append(stem + ".md")
        with open(stem + ".json", "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
            f.write("\n")
    for path in paths:
        with open(path, "w") as f:
            f.write(text)
    if a.json:
        json.dump({"meta": meta, "rows": rows}, sys.stdout, indent=1)
        print()


if __name__ == "__main__":
    main()
