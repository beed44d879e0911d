#!/usr/bin/env python3
"""Print the A2A TCK's runtime dependencies pinned as its uv.lock pins them, one
requirement per line (with the lock's environment markers), for `pip install -r`.

Usage: lock_requirements.py <TCK checkout>

Only the TCK's own `dependencies` and what they pull in are listed: not its `dev` extras
(ruff, mypy), not the TCK package itself (run_tck.py runs from the checkout).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lock_path = Path(sys.argv[1]) / "uv.lock"
    with lock_path.open("rb") as f:
        lock = tomllib.load(f)
    packages = {p["name"]: p for p in lock["package"]}
    root = packages.get("a2a-tck")
    if root is None:
        print(f"{lock_path}: no a2a-tck package in the lock", file=sys.stderr)
        return 1

    # name -> marker ("" when unconditional); a package reached unconditionally once is
    # unconditional.
    wanted: dict[str, str] = {}
    todo = [(d["name"], d.get("marker", "")) for d in root.get("dependencies", [])]
    while todo:
        name, marker = todo.pop()
        if name in wanted and (wanted[name] == "" or wanted[name] == marker):
            continue
        wanted[name] = "" if name in wanted else marker
        for dep in packages[name].get("dependencies", []):
            todo.append((dep["name"], dep.get("marker", "") if not marker else marker))

    for name in sorted(wanted):
        line = f"{name}=={packages[name]['version']}"
        if wanted[name]:
            line += f" ; {wanted[name]}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
