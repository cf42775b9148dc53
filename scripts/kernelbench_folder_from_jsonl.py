"""Write a KernelBench-style problem folder from a JSONL corpus's reference code.

    python scripts/kernelbench_folder_from_jsonl.py CORPUS.jsonl OUT_DIR [--code-field ref_code]

Each record becomes `OUT_DIR/level{level_id}/{task_id}_{slug}.py` holding its `ref_code`; the
slug is the first words of the `Model` docstring. Used to check decontamination: a corpus
decontaminated against a folder built from its own references must be flagged entirely.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

from kernelwright import atomic


def slug(code: str, words: int = 5) -> str:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "problem"
    doc = next((ast.get_docstring(n) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    name = "_".join(re.findall(r"[A-Za-z0-9]+", doc or "")[:words])
    return name or "problem"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--code-field", default="ref_code")
    args = parser.parse_args(argv)
    written = 0
    for n, line in enumerate(args.corpus.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        rec = json.loads(line)
        code = rec.get(args.code_field)
        if not isinstance(code, str) or not code.strip():
            print(f"line {n}: no {args.code_field}, skipped", file=sys.stderr)
            continue
        path = args.out / f"level{rec.get('level_id', 0)}" / f"{rec.get('task_id', n)}_{slug(code)}.py"
        atomic.write_text(path, code if code.endswith("\n") else code + "\n")
        written += 1
    print(f"wrote {written} problems under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
