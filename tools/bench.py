"""Speed ratios, measured side by side in one run (never asserted in tests).

    python -m tools.bench [--cases N]

Each benchmark prints the ratio of two runners over the same input on this machine. Later
issues add theirs. Replay: the gate's three-way replay step (parent build now and patch build,
each case in its own temporary directory, across all cores) against a bare loop that starts the
same invocations with the same parallelism (the irreducible cost is starting the CLI), and
against the serial runner of seed 000.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.bakery import TEMPLATE, bake

# The gate's own modules, exactly as a bake ships them.
sys.path.insert(0, str(TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"))
from _cases import Case, load_cases
from _gate import bin_dir, build_env
from record_cassettes import record
from replay_cassettes import replay


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def build(repo: Path, scratch: Path) -> Path:
    """The example CLI installed from the offline wheelhouse, as the judge installs it."""
    wheelhouse = Path(os.environ.get("ORACLE_WHEELHOUSE", repo / ".oracle" / "wheelhouse"))
    requirements = repo / "scripts/requirements-judge.txt"
    fill = [sys.executable, str(repo / "scripts/wheelhouse.py"), "--dest", str(wheelhouse)]
    fill += ["--requirements", str(requirements), "--report", str(scratch / "wheelhouse.json")]
    subprocess.run(fill, check=True)
    python = build_env(repo, scratch / "env", wheelhouse, requirements)
    return bin_dir(python.parent.parent) / "shop"


def seed_run_case(bin_path: Path, case: Case) -> dict[str, Any]:
    """Seed 000's runner, as published: inherited environment, serial, whole-output decode."""
    env = os.environ.copy()
    env.update(dict(case.env))
    proc = subprocess.run(
        [str(bin_path), *case.argv],
        input=case.stdin,
        env=env,
        capture_output=True,
        check=False,
    )
    out = proc.stdout.decode("utf-8", errors="replace")
    payload: dict[str, Any] = {"exit_code": proc.returncode, "stdout.raw": out}
    try:
        payload["stdout.json"] = json.loads(out) if out.strip() else None
    except json.JSONDecodeError:
        payload["stdout.json"] = None
    return payload


def replay_ratios(repo: Path, command: Path, cases: int) -> tuple[float, float, float]:
    """Seconds for: the gate's replay, a bare parallel loop, seed 000's serial runner."""
    base = load_cases(repo / "oracle/cases.yaml")
    batch = [dataclasses.replace(base[i % len(base)], id=f"case-{i}") for i in range(cases)]
    fixtures = repo / "fixtures"
    cassette = record(command, batch, fixtures, "bench")
    invocations = [case for case in batch for _side in ("parent", "patch")]

    def bare(case: Case) -> None:
        argv = [str(command), *case.argv]
        subprocess.run(argv, input=case.stdin, capture_output=True, check=False)

    def bare_parallel() -> None:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(bare, invocations))

    gate = timed(lambda: replay(batch, cassette, command, command, fixtures))
    loop = timed(bare_parallel)
    serial = timed(lambda: [seed_run_case(command, case) for case in invocations])
    return gate, loop, serial


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cassette cases to replay")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oracle-bench-") as tmp:
        repo = bake(Path(tmp) / "bake")
        gate, loop, serial = replay_ratios(repo, build(repo, Path(tmp)), args.cases)
    print(f"replay of {args.cases} cases (2 invocations each) on {os.cpu_count()} cores")
    print(f"  gate runner      {gate:8.2f} s")
    print(
        f"  bare loop        {loop:8.2f} s   gate / bare   = {gate / loop:5.2f}  (target <= 1.25)"
    )
    ratio = serial / gate
    print(f"  serial (seed 000){serial:8.2f} s   serial / gate = {ratio:5.2f}  (target >= 1.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
