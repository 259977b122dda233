"""One run of the property oracles in oracle/: pytest in the oracle's own environment, the
build under test reached only through the subject worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from _gate.pytest_run import PytestRun, run_pytest
from _gate.seal import TrustedEnv
from _gate.shard import WHOLE, Shard
from _gate.worker import CALL_TIMEOUT

PREFIX = "oracle/"


RETRYABLE = ("failed", "error")


def has_tests(oracle: Path) -> bool:
    return any(p.name.startswith("test_") for p in oracle.rglob("*.py"))


def run(
    runner: TrustedEnv,
    subject: Path,
    oracle: Path,
    timeout: float,
    targets: Sequence[str] = (".",),
    call_timeout: float = CALL_TIMEOUT,
    shard: Shard = WHOLE,
    scene: Path | None = None,
    options: Sequence[str] = (),
) -> PytestRun:
    """One run, the environment checked against its digest before and after: a run that found
    it changed, or left it changed, is no evidence (a module imported late, or the parent's
    run beside the patch's, would load what the patch's worker wrote meanwhile). `scene`: the
    worker's under a perturbation (worker_scene.py's file). `options`: pytest's own, after the
    shard's (`nox -s oracle -- -k NAME`)."""
    runner.check()
    result = run_pytest(
        runner.python,
        oracle,
        targets,
        prefix=PREFIX,
        timeout=timeout,
        trusted=True,
        subject=subject,
        subject_timeout=call_timeout,
        subject_scene=scene,
        options=[*shard.pytest_options(), *options],
        confined=False,  # the trusted runner; the subject plugin confines the worker
    )
    runner.check()
    return result
