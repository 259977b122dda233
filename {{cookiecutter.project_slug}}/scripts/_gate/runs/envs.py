"""Environments: fresh virtual environments filled from the hash-pinned wheelhouse only, and
the offline, non-editable builds of the trees under judgment.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from _gate.core.protocol import FailClosed, NotInWheelhouse
from _gate.plugin.confine import Reach
from _gate.plugin.patch_env import gate_env, search_path
from _gate.runs.git import git
from _gate.runs.process import Completed, run_group
from _gate.runs.provenance import project_info
from _gate.runs.sandbox import at_home, confines, run_confined

# Merge-time evidence must not depend on what the author's shell exported.
WHEELHOUSE = Path(os.environ.get("ORACLE_WHEELHOUSE", ".oracle/wheelhouse"))


def bin_dir(env: Path) -> Path:
    return env / ("Scripts" if os.name == "nt" else "bin")


def find_uv() -> str | None:
    """uv beside this interpreter first (installed from the wheelhouse), then PATH."""
    beside = Path(sys.executable).parent / "uv"
    return str(beside) if beside.exists() else shutil.which("uv")


BUILD_TIMEOUT = 900.0  # seconds for one install: a build backend runs the tree's own code


INSTALL_ENV = {"PIP_NO_INDEX": "1", "UV_OFFLINE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
# The only variables a tree's build backend inherits of the judge's (docs/build-provenance.md):
# what any build on any machine has, beside PATH (_gate/plugin/patch_env.py). Offline and cache
# settings go as flags, so nothing the judge alone sets (JUDGE_OFFLINE, ORACLE_*, PIP_*,
# UV_*, CI's) tells the backend it is judged.
BUILD_PASS_THROUGH = ("LANG", "LC_ALL", "LC_CTYPE", "SOURCE_DATE_EPOCH", "SYSTEMROOT")
# No bytecode written by the build itself: the judge writes it once the build is done, each
# `.pyc` its own compile of the source beside it (_gate/runs/bytecode.py, seal.build_digest).
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


# What the judge's own installs inherit of its environment: where the installer keeps its
# cache, and what any process needs. Nothing else: a shell's UV_OVERRIDE, UV_EXCLUDE or
# PIP_CONSTRAINT would change what an environment holds.
TOOL_PASS_THROUGH = frozenset(
    {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "SYSTEMROOT", "UV_CACHE_DIR", "XDG_CACHE_HOME"}
)


def run_tool(cmd: list[str], what: str, extra: Mapping[str, str] | None = None) -> Completed:
    """A trusted command of the judge's own tools (a venv, an install from the wheelhouse)."""
    env = {key: os.environ[key] for key in TOOL_PASS_THROUGH if key in os.environ}
    env.update(INSTALL_ENV, **(extra or {}))
    return finished(run_group(cmd, timeout=BUILD_TIMEOUT, env=env), what)


def build_variables() -> dict[str, str]:
    """What a build backend inherits: BUILD_PASS_THROUGH, and PATH without the folders of
    virtual environments (the nox session's that started the judge, or `nox -s case`'s): a
    build is the same whichever session asks for it, and kept under one key
    (kept_envs.parent_env_key)."""
    env = {key: os.environ[key] for key in BUILD_PASS_THROUGH if key in os.environ}
    return {**env, "PATH": search_path()}


def run_build(cmd: list[str], what: str, scratch: Path, see: Sequence[Path]) -> Completed:
    """A tree's build backend at work: confined to its scratch (the tree's copy, the throwaway
    environment it builds in, HOME, the wheel it makes), with the environment of anyone's
    build; `see`: what it reads beyond what it names (sandbox.run_confined)."""
    env = build_variables()
    env.update(NO_BYTECODE)
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    reach = Reach(see=tuple(str(path) for path in see))
    done = run_confined(
        cmd,
        writable=[scratch, home],
        timeout=BUILD_TIMEOUT,
        env=at_home(env, home),
        reach=reach,
    )
    return finished(done, what, backend_error(done))


def finished(done: Completed, what: str, why: str = "") -> Completed:
    if done.timed_out:
        raise FailClosed(f"{what} did not finish within {BUILD_TIMEOUT:g} s")
    if done.exit_code != 0:
        raise FailClosed(f"{what} failed: {why or done.last_line()}")
    return done


# What a backend says went wrong, best first: an exception (`LookupError: ...`), then an
# `error: ...` of a compiler or cargo or meson's `ERROR:` (the installer's own `error:` lines,
# `Failed to build ...`, come after the backend's and say less).
ERROR_LINES = (
    re.compile(r"^\s*[\w.]+(?:Error|Exception|Exit|Interrupt)\b"),
    re.compile(r"^\s*(?:error\b|.*\bERROR:)"),
)


def error_line(text: str) -> str:
    """What a failed build says went wrong: the last line of the best kind the backend
    printed, not the installer's closing hint ("" where it printed none)."""
    for kind in ERROR_LINES:
        found = [line.strip() for line in text.splitlines() if kind.match(line)]
        if found:
            return found[-1]
    return ""


def backend_error(done: Completed) -> str:
    return error_line(done.stdout.tail(8000) + "\n" + done.stderr.tail(8000))


def tools_env(dest: Path, wheelhouse: Path, requirements: Path) -> tuple[Path, list[str]]:
    """A fresh venv holding only the hash-checked tools; returns its python and installer
    (offline by its flags alone: a build's installer inherits no setting)."""
    uv = find_uv()
    python = bin_dir(dest) / "python"
    if uv:
        run_tool([uv, "venv", "--quiet", "--python", sys.executable, str(dest)], "uv venv")
        pip = [uv, "pip", "install", "--quiet", "--offline", "--python", str(python)]
        # Copies, never uv's default hardlinks into its cache: a write into one environment
        # would rewrite the cache, and through it the next judgment's oracle environment.
        pip += ["--link-mode", "copy"]
    else:
        run_tool([sys.executable, "-m", "venv", str(dest)], "python -m venv")
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        pip += ["--no-compile"]  # as uv: bytecode is written once, where it is wanted
    pip += ["--no-index", "--find-links", str(wheelhouse)]
    with tempfile.TemporaryDirectory(prefix="oracle-tools-") as tmp:
        cmd = [*pip, "--require-hashes", "-r", str(requirements)]
        run_tool(cmd, "tool install", without_installer(Path(tmp)))
    return python, pip


def without_installer(folder: Path) -> dict[str, str]:
    """UV_EXCLUDE naming a file that lists uv: pinned with the judge's tools, it is the
    judge's own installer, never run from an environment the judge builds, and its binary was
    40 MB of each one's copy, digest and deletion. A variable, not uv's `--excludes` flag, so
    that a uv without the setting, or pip, installs it as before instead of failing; never
    a path with a space (uv splits it), nor the variable of the shell that started the judge."""
    excludes = folder / "excludes.txt"
    excludes.write_text("uv\n", encoding="utf-8")
    return {"UV_EXCLUDE": "" if " " in str(excludes) else str(excludes)}


def dist_infos(env: Path) -> set[Path]:
    return set(env.glob("lib/python*/site-packages/*.dist-info"))


def build_env(tree: Path, dest: Path, wheelhouse: Path, requirements: Path) -> Path:
    """A fresh venv holding the hash-checked tools and `tree`'s wheel; returns its python.

    The tree's backend is the tree's own code: it builds the wheel in a throwaway environment
    that nothing else uses (build_wheel), and the environment judged is then made by the
    installer alone, from that wheel and the local wheelhouse, so no code of the tree ever
    ran in it (_gate/runs/manifest.py holds it to that). Offline: the judge never reaches the
    network. Not editable, so that the tree's own files (conftest.py, pytest settings) never
    sit on sys.path. Runtime dependencies come from the hash-pinned requirements only: the
    wheel is installed without them, then checked, so a dependency the wheelhouse lacks
    fails closed by name instead of crashing every case.
    """
    python, pip = tools_env(dest, wheelhouse, requirements)
    with tempfile.TemporaryDirectory(prefix="oracle-build-") as name:
        # The tools the backend imports: this environment's, read-only to it, where it runs
        # confined; a copy of its own where it would not be (it could rewrite a RECORD here).
        tools = dest if confines() else None
        wheel = build_wheel(tree, Path(name), wheelhouse, requirements, tools)
        run_tool([*pip, "--no-deps", str(wheel)], f"install of {wheel.name}")
    refuse_direct_references(project_info(dest) / "METADATA", tree)
    check_dependencies(python, tree, requirements)
    return python


def build_wheel(
    tree: Path, scratch: Path, wheelhouse: Path, requirements: Path, tools: Path | None
) -> Path:
    """`tree`'s wheel, built by its backend (no build isolation, offline) in a throwaway
    environment in `scratch` that imports the pinned tools from the environment `tools`
    (none: it holds a copy of its own), from a copy of the tree: a backend writes build/ and
    *.egg-info beside the sources, and the worktree stays as checked out for the steps that
    read it."""
    env, copy, out = scratch / "env", scratch / "tree", scratch / "dist"
    python = tools_env(env, wheelhouse, requirements)[0] if tools is None else borrowing(env, tools)
    shutil.copytree(tree, copy, symlinks=True)
    uv = find_uv()
    if uv:
        # Not --quiet: it hides what the backend says went wrong (error_line reads it).
        cmd = [uv, "build", "--wheel", "--offline", "--no-index"]
        cmd += ["--no-build-isolation", "--python", str(python), "--out-dir", str(out)]
        cmd += ["--cache-dir", str(scratch / "cache"), str(copy)]
    else:
        cmd = [str(python), "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check"]
        cmd += ["--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir"]
        cmd += ["--wheel-dir", str(out), str(copy)]
    # What it reads and does not name: the tools it imports, and the repository the tree's
    # version may come from (a worktree's .git names it).
    see = [*([tools] if tools else []), *git_folders(tree)]
    run_build(cmd, f"build of {tree}", scratch, see)
    wheels = sorted(out.glob("*.whl"))
    if len(wheels) != 1:
        raise FailClosed(f"build of {tree} made {len(wheels)} wheels; a build makes one")
    return wheels[0]


def git_folders(tree: Path) -> list[Path]:
    """The git folders a build of `tree` may read its version from: the repository's (its
    common folder), where the tree is a checkout."""
    found = git(tree, "rev-parse", "--git-common-dir", check=False).strip()
    return [(tree / found).resolve()] if found else []  # relative to the tree, or absolute


def borrowing(dest: Path, tools: Path) -> Path:
    """An empty venv at `dest` whose interpreter imports what `tools` holds, as a site folder
    of its own (its `.pth` files processed): the tools without a second install. Its own
    site-packages, where a build's writes land, is the one `sysconfig` names."""
    uv = find_uv()
    if uv:
        run_tool([uv, "venv", "--quiet", "--python", sys.executable, str(dest)], "uv venv")
    else:
        run_tool([sys.executable, "-m", "venv", "--without-pip", str(dest)], "python -m venv")
    (own,) = dest.glob("lib/python*/site-packages")
    (theirs,) = tools.glob("lib/python*/site-packages")
    (own / "_oracle_tools.pth").write_text(f"import site; site.addsitedir({str(theirs)!r})\n")
    return bin_dir(dest) / "python"


def refuse_direct_references(metadata: Path, tree: Path) -> None:
    """A dependency named by path or URL would bypass the hashes: refuse it."""
    from email.parser import BytesHeaderParser

    headers = BytesHeaderParser().parsebytes(metadata.read_bytes())
    for requirement in headers.get_all("Requires-Dist") or []:
        if "@" in requirement.split(";", 1)[0]:
            raise NotInWheelhouse(
                f"{tree}: dependency {requirement.strip()!r} is a direct reference; runtime "
                "dependencies come only from the hash-pinned wheelhouse: pin it by version "
                "in scripts/requirements-judge.txt with hashes"
            )


def check_dependencies(python: Path, tree: Path, requirements: Path) -> None:
    uv = find_uv()
    cmd = (
        [uv, "pip", "check", "--python", str(python)] if uv else [str(python), "-m", "pip", "check"]
    )
    # The build's python runs its environment's .pth files: the patch's code, so confined.
    with tempfile.TemporaryDirectory(prefix="oracle-check-") as tmp:
        env = {**gate_env(Path(tmp), Path(tmp)), "UV_CACHE_DIR": tmp}
        done = run_confined(cmd, writable=[Path(tmp)], timeout=BUILD_TIMEOUT, env=env)
    if done.exit_code == 0:
        return
    problems = [
        line.strip()
        for line in (done.stdout.tail() + done.stderr.tail()).splitlines()
        if "requires" in line or "not installed" in line
    ]
    first = problems[0] if problems else done.last_line()
    raise NotInWheelhouse(
        f"{tree}: a runtime dependency is missing from the hash-pinned wheelhouse ({first}); "
        f"add it to {requirements.name} with hashes (uv pip compile --generate-hashes)"
    )
