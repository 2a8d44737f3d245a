"""Writes tokenizer_cases.json: llama.cpp's token ids for a fixed set of hard texts (Unicode
classes, whitespace runs, contractions, special-token texts) on the three reference models,
their end-of-generation and control ids, and a digest of every token's decoded bytes.

    pip install llama-cpp-python==0.3.36   # CPU build
    python3 tokenizer_cases.py [MODEL_DIR]

tests/tokenizer_golden.rs reads the output; regenerate only when the reference changes.
"""
import json
import os
import random
import struct
import sys

import ctypes
import llama_cpp

MODELS = {
    "smollm2-135m-instruct-q4_1": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b-instruct-q4_k_m": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "gemma-3-270m-q4_k_m": "gemma-3-270m-q4_k_m.gguf",
}

FIXED = [
    "", " ", "  ", "\n", "'", "' s", "''s", "I'LL we'Re it'S", "a\u0301", "\u0301a", "  a", "   a", "\t a", " \ta",
    "a  ", "x\n\n  y", "x  \n  \n  y", "1 2  3   4", "a1b2c3", "1234567", "３.１４", "x\u00b2+y\u00b2", "\u2163 \u216b",
    "\u0663\u0664\u0665", "<<|im_start|>>", "<|im_start|><|im_end|>", "<start_of_turn><start_of_turn>",
    "<|im_<|im_end|>", "<tool_call></tool_call>", "<unk><s></s><bos><eos><pad>", "[multimodal]", "<0x41><0x0A>",
    "    \n    \n", "\r\n", " \r\n", "\r\r\n\n", "\u00a0a", "a\u00a0b", "\u3000\u3000a", "a\u0085b", "a\u2028b",
    "a\u001fb", "\u200b\u200d\ufeff", "नमस्ते किताब", "ஆங்கிலம்", "ক্ষ", "กินข้าว", "🇫🇷🇩🇪", "👩\u200d💻👍🏽",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "ǅemal ᾨ İstanbul ﬁne", "▁hello Ġhello Ċ", "a" * 300, " " * 70, "\n" * 40, "\t" * 40,
    "ab" * 100, "1" * 50, "😀" * 20, "def f(x):\n\treturn x  # ok\n\n\n", "<table><tr><td>1</td></tr></table>",
]

POOL = (
    list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    + list(" " * 12) + ["\t", "\n", "\n", "\r", "\r\n", "\v", "\f"]
    + list(".,;:!?'\"`~@#$%^&*()-_=+[]{}<>/\\|")
    + list("éèüöñçßÅøæœ") + ["e\u0301", "a\u0308", "\u0301"]
    + list("東京は日本の首都です。") + list("한국어") + list("ไทยภาษา") + list("हिन्दी") + list("العربية")
    + ["🎉", "🚀", "👩\u200d💻", "\u200d", "\ufe0f", "\u00a0", "\u3000", "\u2028", "\u0085", "\u001f"]
    + list("²½Ⅻ٣０≈∑√€")
    + ["'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'x"]
    + ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
       "<unk>", "[multimodal]", "<tool_call>", "<|im_", "<reponame>", "<td>", "</s>", "<s>", "<0x41>", "▁", "Ġ"]
    + ["    ", "\n\n", "\t\t", "  \n", "hello", " world", " the", "café", "1234567"]
)


def texts(n):
    rng = random.Random(20251122)
    out = list(FIXED)
    while len(out) < n:
        if rng.random() < 0.7:
            out.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 30))))
        else:
            cps = []
            for _ in range(rng.randint(1, 12)):
                cp = rng.choice([rng.randint(0x20, 0x7E), rng.randint(0x80, 0x2FFF), rng.randint(0x3000, 0xFFFF),
                                 rng.randint(0x10000, 0x3FFFF)])
                cps.append(chr(0x41 if 0xD800 <= cp <= 0xDFFF else cp))
            out.append("".join(cps))
    return out


def ranges(ids):
    """Ascending ids as inclusive [first, last] runs."""
    out = []
    for i in ids:
        if out and out[-1][1] + 1 == i:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def piece_digest(vocab, n):
    """FNV-1a 64 over (u32 LE length, bytes) of every token's piece, special off then on."""
    h = 0xCBF29CE484222325
    buf = ctypes.create_string_buffer(4096)
    for special in (False, True):
        for i in range(n):
            k = llama_cpp.llama_token_to_piece(vocab, i, buf, len(buf), 0, special)
            assert k >= 0
            for b in struct.pack("<I", k) + buf.raw[:k]:
                h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/tern/models")
    cases = texts(160)
    out = {"reference": f"llama.cpp (llama-cpp-python {llama_cpp.__version__}, CPU build)", "texts": cases,
           "models": {}}
    for name, file in MODELS.items():
        llm = llama_cpp.Llama(os.path.join(model_dir, file), vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n = llama_cpp.llama_vocab_n_tokens(vocab)
        out["models"][name] = {
            "file": file,
            "eog": [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)],
            "control_ranges": ranges(i for i in range(n) if llama_cpp.llama_vocab_is_control(vocab, i)),
            "piece_digest": piece_digest(vocab, n),
            # add_special=True: BOS where the model's rule adds one.
            "ids": [llm.tokenize(t.encode(), add_bos=True, special=False) for t in cases],
            "ids_parse_special": [llm.tokenize(t.encode(), add_bos=True, special=True) for t in cases],
        }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer_cases.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


main()
