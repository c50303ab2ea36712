#!/usr/bin/env python3
"""A `command` agent that is a plain program, not a model: it measures the text between
<<<TEXT and TEXT>>> in its prompt and answers through the launcher, like any agent would."""
import json, os, re, subprocess, sys

prompt = sys.stdin.read()
match = re.search(r"<<<TEXT\n(.*?)\nTEXT>>>", prompt, re.S)
text = match.group(1) if match else ""
answer = {
    "lines": len(text.splitlines()),
    "words": len(text.split()),
    "todos": len(re.findall(r"\bTODO\b", text)),
    "longest_line": max((len(l) for l in text.splitlines()), default=0),
}
done = subprocess.run(
    [os.environ["AWF_LAUNCHER"], "result", os.environ["AWF_OP"]],
    input=json.dumps(answer), capture_output=True, text=True,
)
print(done.stdout.strip(), file=sys.stderr)
sys.exit(done.returncode)
