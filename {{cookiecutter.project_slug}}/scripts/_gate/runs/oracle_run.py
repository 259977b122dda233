"""One run of the property oracles in oracle/: pytest in the oracle's own environment, the
build under test reached only through the subject worker.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from _gate.core.config import Config
from _gate.core.seal import TrustedEnv, add_seal_args
from _gate.plugin.shard import WHOLE, Shard
from _gate.runs.pytest_run import PytestOptions, PytestRun, Subject, run_pytest

PREFIX = "oracle/"


RETRYABLE = ("failed", "error")


def has_tests(oracle: Path) -> bool:
    return any(p.name.startswith("test_") for p in oracle.rglob("*.py"))


def run(
    runner: TrustedEnv,
    subject: Subject,
    oracle: Path,
    timeout: float,
    *,
    targets: Sequence[str] = (".",),
    shard: Shard = WHOLE,
    options: Sequence[str] = (),
) -> PytestRun:
    """One run, the environment checked against its digest before and after: a run that found
    it changed, or left it changed, is no evidence (a module imported late, or the parent's
    run beside the patch's, would load what the patch's worker wrote meanwhile). `subject`:
    the build the oracle's tests call, from a worker (in a perturbation's scene). `options`:
    pytest's own, after the shard's (`nox -s oracle -- -k NAME`)."""
    runner.check()
    how = PytestOptions(
        prefix=PREFIX,
        timeout=timeout,
        subject=subject,
        options=(*shard.pytest_options(), *options),
        confined=False,  # the trusted runner; the subject plugin confines the worker
    )
    result = run_pytest(runner.python, oracle, targets, how)
    runner.check()
    return result


def add_oracle_args(p: argparse.ArgumentParser, *, oracle_python: str, timeout: float) -> None:
    """The flags of a step that runs the base's property oracles on a build (the oracle,
    flake budget's retries): the oracle, its environment and seal, the patch's build, and
    the time a run and one call into the build may take."""
    p.add_argument("--oracle", type=Path, required=True, help="oracle/ of the base tree")
    p.add_argument(
        "--oracle-python",
        type=Path,
        required=not oracle_python,
        help=oracle_python or "python of the oracle env (no build)",
    )
    add_seal_args(p)
    p.add_argument("--patch-python", type=Path, required=True, help="patch build's python")
    p.add_argument("--timeout", type=float, default=timeout, help="seconds per pytest run")
    p.add_argument(
        "--call-timeout",
        type=float,
        default=Config.call_timeout,
        help="seconds one call into the build may take",
    )
