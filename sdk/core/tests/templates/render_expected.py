#!/usr/bin/env python3
"""Renders the chat templates of this folder the way Hugging Face transformers'
`apply_chat_template` does, for the conversations below, into expected.json.

The environment is transformers' (`utils/chat_template_utils.py`, `_compile_jinja_template`):
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols
extension, its `tojson` (json.dumps with ensure_ascii=False), `raise_exception` and
`strftime_now`, here at a fixed time so that the output is reproducible. The template gets
`messages`, `tools`, `documents`, `add_generation_prompt`, the tokenizer's special tokens and
any further keyword arguments (`enable_thinking`).

Run from this folder: `python3 render_expected.py` (Jinja2 >= 3.1).
"""

import json
from datetime import datetime, timezone
from pathlib import Path

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# 2026-03-05 14:07:09 UTC, a Thursday: what strftime_now reports.
NOW = 1772719629

# Template file, BOS and EOS token texts of the model's tokenizer, whether it shows tools.
TEMPLATES = [
    ("Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", True),
    ("Qwen3.5-4B.jinja", "", "<|im_end|>", True),
    ("HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>", False),
    ("meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", True),
    ("microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", False),
    ("ibm-granite-granite-4.0.jinja", "<|end_of_text|>", "<|end_of_text|>", True),
    ("LFM2.5-Instruct.jinja", "<|startoftext|>", "<|im_end|>", True),
    ("google-gemma-4-31B-it.jinja", "<bos>", "<eos>", True),
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Zürich\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}


def m(role, content):
    return {"role": role, "content": content}


SYSTEM_USER = [m("system", "You are a terse assistant.  "), m("user", "What is 2 + 2?")]
MULTI_TURN = [
    m("system", "Answer in French."),
    m("user", "Hello!"),
    m("assistant", "Bonjour ! Comment puis-je aider ?"),
    m("user", "Say 'thank you' <b>& ü 🦀</b>\n\nplease."),
]
NO_SYSTEM = [m("user", "  Hi  "), m("assistant", "Hello."), m("user", "Bye")]
THOUGHT = [
    m("user", "Is 17 prime?"),
    m("assistant", "<think>\nCheck divisors up to 4.\n</think>\n\nYes, 17 is prime."),
    m("user", "And 21?"),
]
TOOL_RESULT = [
    m("user", "Weather in Paris?"),
    m("assistant", "Let me check."),
    m("tool", "{\"temperature\": 18, \"sky\": \"clear\"}"),
]

# (name, messages, add_generation_prompt, tools?, extra variables)
CASES = [
    ("system_user", SYSTEM_USER, True, False, {}),
    ("system_user_no_prompt", SYSTEM_USER, False, False, {}),
    ("multi_turn", MULTI_TURN, True, False, {}),
    ("multi_turn_no_prompt", MULTI_TURN, False, False, {}),
    ("no_system", NO_SYSTEM, True, False, {}),
    ("thought", THOUGHT, True, False, {}),
    ("thinking_off", SYSTEM_USER, True, False, {"enable_thinking": False}),
    ("thinking_on", SYSTEM_USER, True, False, {"enable_thinking": True}),
    ("tools", SYSTEM_USER, True, True, {}),
    ("tools_no_system", SYSTEM_USER[1:], True, True, {}),
    ("tool_result", TOOL_RESULT, True, True, {}),
]


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(NOW, tz=timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    here = Path(__file__).resolve().parent
    env = environment()
    out = []
    for file, bos, eos, shows_tools in TEMPLATES:
        template = env.from_string((here / file).read_text(encoding="utf-8"))
        for name, messages, add_generation_prompt, with_tools, variables in CASES:
            if with_tools and not shows_tools:
                continue
            tools = [WEATHER_TOOL] if with_tools else None
            try:
                rendered = template.render(
                    messages=messages,
                    tools=tools,
                    documents=None,
                    add_generation_prompt=add_generation_prompt,
                    bos_token=bos,
                    eos_token=eos,
                    **variables,
                )
                error = None
            except jinja2.exceptions.TemplateError as e:
                rendered, error = None, str(e)
            out.append(
                {
                    "template": file,
                    "case": name,
                    "bos_token": bos,
                    "eos_token": eos,
                    "messages": messages,
                    "add_generation_prompt": add_generation_prompt,
                    "tools": tools,
                    "variables": variables,
                    "now": NOW,
                    "rendered": rendered,
                    "error": error,
                }
            )
    path = here / "expected.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(out)} renderings written to {path.name}")


if __name__ == "__main__":
    main()
