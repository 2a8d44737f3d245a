#!/usr/bin/env python3
"""llama.cpp's prompt-lookup decoding on given prompt tokens, for `tern-lab bench-workloads --llama-cpp`.

Reads JSON lines {id, prompt_ids, max_new_tokens}; for each case generates greedily with
llama-cpp-python (the PyPI package `llama-cpp-python`, which builds llama.cpp), plain and with
its `LlamaPromptLookupDecoding` draft model (prompt lookup: the longest n-gram of the context
suffix, up to --ngram tokens, found earlier in the context; its next --draft tokens verified in
one batch), --reps runs each way, interleaved. Decode tokens/s is timed from the first generated
token to the last, as Tern's stats do. Prints one JSON line per case:
{id, plain_tps, lookup_tps, generated, identical}.

Install llama.cpp for this CPU first, e.g.
  CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF" pip install llama-cpp-python==0.3.36
"""
import argparse, json, statistics, sys, time


def decode(llm, ids, max_new):
    import llama_cpp
    out, t_first = [], None
    for tok in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        if t_first is None:
            t_first = time.perf_counter()
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok):
            break
        out.append(tok)
        if len(out) >= max_new:
            break
    elapsed = time.perf_counter() - (t_first or time.perf_counter())
    return out, (len(out) - 1) / elapsed if elapsed > 0 and len(out) > 1 else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ngram", type=int, default=3, help="longest n-gram looked up")
    ap.add_argument("--draft", type=int, default=3, help="tokens drafted per step (llama-lookup's default: 3)")
    a = ap.parse_args()

    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    cases = [json.loads(l) for l in open(a.cases) if l.strip()]
    n_ctx = max(len(c["prompt_ids"]) + c["max_new_tokens"] for c in cases) + 16
    common = dict(model_path=a.model, n_ctx=n_ctx, n_batch=512, n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    plain = Llama(**common)
    # Verifying a draft reads the logits of every drafted position: llama-cpp-python keeps them
    # only with logits_all.
    lookup = Llama(**common, logits_all=True,
                   draft_model=LlamaPromptLookupDecoding(max_ngram_size=a.ngram, num_pred_tokens=a.draft))
    for c in cases:
        ids, max_new = c["prompt_ids"], c["max_new_tokens"]
        runs = {"plain": [], "lookup": []}
        outs = set()
        for rep in range(a.reps):
            order = ["plain", "lookup"] if rep % 2 == 0 else ["lookup", "plain"]
            for way in order:
                toks, tps = decode(plain if way == "plain" else lookup, ids, max_new)
                runs[way].append(tps)
                outs.add(tuple(toks))
        print(json.dumps({
            "id": c["id"],
            "plain_tps": statistics.median(runs["plain"]),
            "lookup_tps": statistics.median(runs["lookup"]),
            "generated": len(next(iter(outs))),
            "identical": len(outs) == 1,
        }), flush=True)


if __name__ == "__main__":
    sys.exit(main())
