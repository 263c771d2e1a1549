#!/usr/bin/env python3
"""Checks that every ```cpp block of README.md stands verbatim in a file under examples/.

The examples are compiled by every CI build, so this keeps the README's code true."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
readme = (root / "README.md").read_text()
examples = {p.name: p.read_text() for p in (root / "examples").glob("*.cpp")}

blocks = re.findall(r"```cpp\n(.*?)```", readme, flags=re.S)
missing = [b for b in blocks if not any(b in text for text in examples.values())]
for block in missing:
    first = block.strip().splitlines()[0]
    print(f"README snippet not found in examples/*.cpp: starts with: {first}", file=sys.stderr)
print(f"README snippets: {len(blocks) - len(missing)} of {len(blocks)} found in examples/")
sys.exit(1 if missing or not blocks else 0)
