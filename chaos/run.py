"""``python -m chaos.run [--backends sqlite,redis,postgres] [--scenarios 1,2,...] [--short]``

Runs each scenario on each backend and prints one table (stdout; progress on stderr). Exit
status 1 if any row failed. Work files (marks, worker logs, SQLite files) stay in --workdir.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import traceback
from pathlib import Path

from chaos import (
    harness as h,
)
from chaos import (
    report,
    s1_kill_storm,
    s2_deploy,
    s3_backend_restart,
    s4_cut_connections,
    s5_runaway,
    s6_poison,
    s7_state_machine,
    s8_group_storm,
    s9_failover,
    s10_chain_storm,
    s11_resume,
)

SCENARIOS = {
    "1": s1_kill_storm,
    "2": s2_deploy,
    "3": s3_backend_restart,
    "4": s4_cut_connections,
    "5": s5_runaway,
    "6": s6_poison,
    "7": s7_state_machine,
    "8": s8_group_storm,
    "9": s9_failover,
    "10": s10_chain_storm,
    "11": s11_resume,
}
NAMES = {
    "1": s1_kill_storm.NAME, "2": s2_deploy.NAME, "3": s3_backend_restart.NAME,
    "4": s4_cut_connections.NAME, "5": s5_runaway.NAME_A, "6": s6_poison.NAME,
    "7": s7_state_machine.NAME, "8": s8_group_storm.NAME, "9": s9_failover.NAME_CLUSTER,
    "10": s10_chain_storm.NAME, "11": s11_resume.NAME,
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chaos.run", description=__doc__.split("\n\n")[1]
    )
    parser.add_argument("--backends", default=",".join(h.KINDS))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--short", action="store_true", help="small sizes (a quick smoke run)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)  # the harness's own pools: no warning noise
    kinds = [k.strip() for k in args.backends.split(",") if k.strip()]
    picked = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    h.say(f"chaos: scenarios {picked} on {kinds}; work files in {workdir}")
    started = time.monotonic()
    results: list[h.Result] = []
    for key in picked:
        module = SCENARIOS[key]
        for kind in kinds:
            problem = h.service_problem(kind)
            if problem is None and hasattr(module, "pending_reason"):
                problem = module.pending_reason(kind)
            if problem:
                results.append(h.Result(NAMES[key], kind, pending=problem))
                continue
            h.say(f"== scenario {key} on {kind}")
            t0 = time.monotonic()
            try:
                out = module.run(kind, workdir, short=args.short)
            except Exception as exc:  # a broken scenario is a failed row, not a lost run
                traceback.print_exc()
                out = h.Result(
                    NAMES[key], kind, notes=[f"FAIL: harness error {type(exc).__name__}: {exc}"]
                )
            for r in out if isinstance(out, list) else [out]:
                r.seconds = r.seconds or time.monotonic() - t0
                results.append(r)
                h.say(f"   {r.scenario}/{r.backend}: {'PASS' if r.ok else 'FAIL'} {r.notes}")
    text = report.table(results)
    total = time.monotonic() - started
    size = "--short" if args.short else "full"
    text += f"\n\nTotal {total / 60:.1f} min; backends {','.join(kinds)}; {size} run.\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0 if all(r.ok or r.pending for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
