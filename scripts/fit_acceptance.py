#!/usr/bin/env python3
"""Fits the acceptance model's starting weights (sdk/core/src/speculative/features.rs,
INITIAL_WEIGHTS) by L2-regularised logistic regression on examples from the
`tern-lab acceptance-data` command, one file per model:

    tern-lab acceptance-data --model MODEL --workloads WORKLOADS > smollm2.jsonl
    python3 scripts/fit_acceptance.py smollm2.jsonl qwen2.5.jsonl

Prints, for each file, the log loss and AUC of the current weights and of weights fitted on
the other files (how well a fit carries over to a model it has not seen), then the weights
fitted on all files, rounded, as a Rust array. Needs numpy.
"""

import argparse
import json
import re
from pathlib import Path

import numpy as np

FEATURES = Path(__file__).resolve().parent.parent / "sdk/core/src/speculative/features.rs"


def current_weights():
    text = FEATURES.read_text()
    body = re.search(r"INITIAL_WEIGHTS: \[f32; N\] = \[(.*?)\];", text, re.S).group(1)
    return np.array([float(v) for v in body.replace("\n", " ").split(",") if v.strip()])


def load(path):
    xs, ys = [], []
    with open(path) as f:
        for line in f:
            e = json.loads(line)
            xs.append(e["x"])
            ys.append(e["label"])
    return np.array(xs, dtype=np.float64), np.array(ys, dtype=np.float64)


def fit(x, y, l2):
    """Newton's method on the mean log loss plus l2/2 |w|^2 (the bias column included: a
    feature that never occurs keeps weight 0)."""
    w = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (p - y) / len(y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def scores(w, x, y):
    p = np.clip(1 / (1 + np.exp(-np.clip(x @ w, -30, 30))), 1e-6, 1 - 1e-6)
    loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
    # AUC: the chance that an accepted example scores above a rejected one (ties count half).
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    ranks[order] = np.arange(1, len(p) + 1)
    for v in np.unique(p):
        tie = p == v
        ranks[tie] = ranks[tie].mean()
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    auc = (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1)
    return loss, auc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="tern-lab acceptance-data output, one file per model")
    ap.add_argument("--l2", type=float, default=1e-4, help="regularisation strength")
    args = ap.parse_args()
    data = {f: load(f) for f in args.files}
    current = current_weights()
    for f, (x, y) in data.items():
        others = [d for g, d in data.items() if g != f]
        loss, auc = scores(current, x, y)
        line = f"{f}: {len(y)} examples, {y.mean():.2f} accepted; current weights: loss {loss:.4f} AUC {auc:.4f}"
        if others:
            w = fit(np.vstack([d[0] for d in others]), np.concatenate([d[1] for d in others]), args.l2)
            loss, auc = scores(w, x, y)
            line += f"; fitted on the others: loss {loss:.4f} AUC {auc:.4f}"
        print(line)
    x = np.vstack([d[0] for d in data.values()])
    y = np.concatenate([d[1] for d in data.values()])
    w = fit(x, y, args.l2)
    loss, auc = scores(w, x, y)
    print(f"fitted on all: loss {loss:.4f} AUC {auc:.4f}")
    print("pub const INITIAL_WEIGHTS: [f32; N] = [")
    print("    " + ", ".join(f"{v:.2f}" for v in w) + ",")
    print("];")


if __name__ == "__main__":
    main()
