#!/usr/bin/env python3
"""Writes the dev workloads' `ui` and `reply` cases as plain files the sample-logic suites read
(Kotlin and Swift have no JSON reader in their standard libraries on Linux that both share):

  OUT/ui/<id>.screen.json   the screen, as the prompt shows it
  OUT/ui/<id>.goal.txt      the goal
  OUT/reply/<id>.tsv        line 1: the user's name; then `sender<TAB>text` per message, oldest
                            first; the last line is the incoming message to answer

usage: cases.py WORKLOADS.jsonl OUT
"""
import json
import os
import re
import sys


def main(workloads, out):
    os.makedirs(os.path.join(out, "ui"), exist_ok=True)
    os.makedirs(os.path.join(out, "reply"), exist_ok=True)
    counts = {"ui": 0, "reply": 0}
    with open(workloads, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            case = json.loads(line)
            user = next(m["content"] for m in case["messages"] if m["role"] == "user")
            if case["task"] == "ui":
                m = re.fullmatch(r"Screen:\n(.*)\n\nGoal: (.*)", user, re.S)
                screen = json.loads(m.group(1))
                write(out, "ui", case["id"] + ".screen.json", json.dumps(screen, indent=1))
                write(out, "ui", case["id"] + ".goal.txt", m.group(2).strip())
            elif case["task"] == "reply":
                m = re.fullmatch(r"Conversation so far:\n(.*)\n\nWrite (.*)'s reply to the last message\.", user, re.S)
                rows = [l.split(": ", 1) for l in m.group(1).splitlines() if l.strip()]
                write(out, "reply", case["id"] + ".tsv", "\n".join([m.group(2)] + ["\t".join(r) for r in rows]))
            else:
                continue
            counts[case["task"]] += 1
    print(f"{counts['ui']} ui and {counts['reply']} reply cases")


def write(out, kind, name, text):
    with open(os.path.join(out, kind, name), "w", encoding="utf-8") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
