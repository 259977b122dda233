"""Real bakes, real git, real nox: the helpers shared by the demo, the bench and the tests."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parent.parent
IDENTITY = (
    "-c",
    "user.name=oracle-dev",
    "-c",
    "user.email=oracle-dev@localhost",
    "-c",
    "commit.gpgsign=false",
)


# What `nox -s judge` sets for the judge (the baked noxfile's offline_env), for the tools that
# run a checkout's scripts/judge.py without nox.
OFFLINE = {"JUDGE_OFFLINE": "1", "PIP_NO_INDEX": "1", "UV_OFFLINE": "1"}
# Owners of the bakes the demo and the suite make: cookiecutter.json's default is a placeholder
# the judge refuses (preconditions), as it should for a project nobody owns.
OWNERS = "@shop-example/maintainers"


def bake(output_dir: Path, **answers: Any) -> Path:
    """Bake the template with cookiecutter's API; returns the project folder."""
    context = {"owners": OWNERS, **{key: str(value) for key, value in answers.items()}}
    return Path(
        cookiecutter(
            str(TEMPLATE), no_input=True, output_dir=str(output_dir), extra_context=context
        )
    )


def load_hook(name: str) -> ModuleType:
    """A hook of the template as plain Python: its rules and helpers without a bake."""
    spec = importlib.util.spec_from_file_location(name, TEMPLATE / "hooks" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *IDENTITY, *args], cwd=repo, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    """Replace one exact occurrence, so a recipe that no longer matches fails loudly."""
    text = path.read_text("utf-8")
    if text.count(old) != 1:
        raise ValueError(f"{path}: expected exactly one {old!r}")
    path.write_text(text.replace(old, new), "utf-8")


def branch(repo: Path, name: str, change: Callable[[Path], object], base: str = "main") -> str:
    """Commit `change` on a new branch from `base`, return to `base`; returns the branch name."""
    git(repo, "checkout", "--quiet", "-b", name, base)
    try:
        change(repo)
        git(repo, "add", "--all")
        git(repo, "commit", "--quiet", "--no-verify", "-m", f"patch: {name}")
    finally:
        git(repo, "checkout", "--quiet", "--force", base)
    return name


@dataclass
class Verdict:
    returncode: int
    report: dict[str, Any]
    output: str

    def step(self, name: str) -> dict[str, Any]:
        return next(s for s in self.report["steps"] if s["name"] == name)

    @property
    def statuses(self) -> dict[str, str]:
        return {s["name"]: s["status"] for s in self.report["steps"]}


def judge(
    repo: Path, *args: str, env: Mapping[str, str] | None = None, prefix: Sequence[str] = ()
) -> Verdict:
    """Run `nox -s judge -- ARGS` in `repo` (under `prefix`, e.g. unshare) and read its report."""
    report = repo / "reports" / "judge-report.json"
    report.unlink(missing_ok=True)
    proc = subprocess.run(
        [*prefix, "nox", "-s", "judge", "--", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    data = json.loads(report.read_text("utf-8")) if report.is_file() else {}
    return Verdict(proc.returncode, data, proc.stdout + proc.stderr)


def judge_script(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> Verdict:
    """Run the checkout's own scripts/judge.py as `nox -s judge` runs it (offline, from the
    shared wheelhouse), without nox: for what the judge decides before it builds anything."""
    env = {**os.environ, **OFFLINE, **(env or {})}
    wheelhouse = env.get("ORACLE_WHEELHOUSE", str(repo / ".oracle" / "wheelhouse"))
    reports = repo / "reports"
    (reports / "judge-report.json").unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "scripts/judge.py", "--wheelhouse", wheelhouse, *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    report = reports / "judge-report.json"
    data = json.loads(report.read_text("utf-8")) if report.is_file() else {}
    return Verdict(proc.returncode, data, proc.stdout + proc.stderr)


if __name__ == "__main__":
    # python -m tools.bakery DEST [answer=value ...]
    print(bake(Path(sys.argv[1]), **dict(arg.split("=", 1) for arg in sys.argv[2:])))
