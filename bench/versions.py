"""Same-run A/B of two duly versions: one metric, one target, alternated round by round.

``bench/ab.py`` compares targets within one checkout; this compares the working tree with an
earlier commit on the same target, so a change's cost is measured against what it changed
(the machine drifts between runs taken minutes apart: alternate, never compare two runs)::

    .venv/bin/python bench/versions.py drain_default duly/redis --base 842dd70 --rounds 8

The base commit is checked out once into a detached worktree under the system's temp
directory (kept for the next run); each round runs ``bench/ab.py METRIC TARGET --rounds 1`` in
a fresh interpreter of each tree (its ``src`` first on ``PYTHONPATH``), base first then head,
and prints each median and the ratio head/base of the medians and of each round's pair.
Only duly targets make sense here; both trees need ``bench/ab.py`` (from fb61012 on).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HEAD = Path(__file__).resolve().parent.parent
_ROUND = re.compile(r"^round \d+ \S+ \S+ ([\d,.]+)$", re.MULTILINE)


def checkout(base: str) -> Path:
    """A detached worktree of ``base`` (made once, reused)."""
    sha = subprocess.run(
        ["git", "-C", str(HEAD), "rev-parse", "--short=12", base],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"duly-base-{sha}"
    if not (tree / "bench" / "ab.py").exists():
        subprocess.run(
            ["git", "-C", str(HEAD), "worktree", "add", "--detach", "--force", str(tree), sha],
            check=True,
            capture_output=True,
        )
    return tree


def measure(tree: Path, metric: str, target: str) -> float:
    """One round of ``metric`` on ``target`` with the duly of ``tree``."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}{os.pathsep}{tree}"}
    done = subprocess.run(
        [sys.executable, "bench/ab.py", metric, target, "--rounds", "1"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    found = _ROUND.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{tree}: bench/ab.py failed:\n{done.stdout}\n{done.stderr}")
    return float(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("metric", help="as in bench/ab.py: drain_default, enqueue, bulk, ...")
    parser.add_argument("target", help="duly/redis, duly/postgres or duly/sqlite")
    parser.add_argument("--base", required=True, help="the commit to compare the tree with")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    base_tree = checkout(args.base)
    base: list[float] = []
    head: list[float] = []
    for i in range(args.rounds):
        base.append(measure(base_tree, args.metric, args.target))
        head.append(measure(HEAD, args.metric, args.target))
        print(f"round {i + 1}: base {base[-1]:,.1f}  head {head[-1]:,.1f}", flush=True)
    paired = statistics.median(h / b for h, b in zip(head, base, strict=True))
    base_median, head_median = statistics.median(base), statistics.median(head)
    print(
        f"{args.metric} {args.target}: base median {base_median:,.1f} "
        f"({min(base):,.1f}-{max(base):,.1f}), head median {head_median:,.1f} "
        f"({min(head):,.1f}-{max(head):,.1f}); head/base {head_median / base_median:.3f} "
        f"(median of paired rounds {paired:.3f})"
    )


if __name__ == "__main__":
    main()
