"""One run of the property oracles in oracle/: pytest in the oracle's own environment, the
build under test reached only through the subject worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from _gate.core.seal import TrustedEnv
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
