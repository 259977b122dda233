"""What a confined job sees of variables and mounts, against docs/confinement.md (issue 48).

Each kind of job the gate starts is started here as the gate starts it, from a judge whose
environment holds what a CI runner's does (its variables, a token) and the gate's own
settings; each job prints the names of its variables and its mounts. The names must be the
documented list of its scene, no more and no less; the mounts must cover the documented
folders with empty file systems of the job's own, with only what the job names bound back.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _gate.plugin import confine
from _gate.plugin.patch_env import gate_env
from _gate.plugin.worker_scene import WorkerScene
from _gate.runs.case_runs import Job, Scratch, run_case, run_perturbed
from _gate.runs.cases import parse_case
from _gate.runs.collect import collection_env
from _gate.runs.envs import build_variables, run_build
from _gate.runs.perturb import Perturbation
from _gate.runs.pytest_run import PytestOptions, run_pytest
from _gate.runs.sandbox import run_confined

from tests.helpers import SCRIPTS

pytestmark = pytest.mark.fast  # real jobs of the launcher: no build, no nox

DOC = SCRIPTS.parent / "docs" / "confinement.md"
# A CI runner's judge: its variables, a token, and the gate's own settings.
JUDGES = {
    "CI": "true",
    "GITHUB_ACTIONS": "true",
    "GITHUB_TOKEN": "ghs_not_a_real_token",
    "RUNNER_TEMP": "/home/runner/work/_temp",
    "AWS_SECRET_ACCESS_KEY": "not-a-real-key",
    "ORACLE_REVIEW": "1",
    "JUDGE_OFFLINE": "1",
    "PIP_INDEX_URL": "https://example.invalid/simple",
    "UV_INDEX_URL": "https://example.invalid/simple",
    "PYTHONPATH": "/nonexistent/judge",
    "PYTEST_ADDOPTS": "-p judge_plugin",
    "LANG": "C.UTF-8",
}
# Prints the names of the variables it was started with (as the kernel holds them: Python
# and pytest add their own to os.environ) and where its file systems are mounted, by type.
STARTED = (
    "[v.split(b'=')[0].decode() for v in open('/proc/self/environ', 'rb').read().split(b'\\0')"
    " if v]"
)
LOOK = f"""
import json, os
mounts = {{}}
for line in open("/proc/self/mountinfo"):
    fields, _, rest = line.partition(" - ")
    mounts[fields.split()[4]] = rest.split()[0]
print(json.dumps({{"env": sorted({STARTED}), "mounts": mounts}}))
"""


def documented() -> dict[str, set[str]]:
    """docs/confinement.md's variables by scene (`- scene: `NAMES``)."""
    text = DOC.read_text("utf-8")
    start = text.index("<!-- the variables a confined job sees")
    rows = re.findall(r"^- (\w+): `([A-Z_ ]+)`", text[start:], re.M)
    return {scene: set(names.split()) for scene, names in rows}


def seen(stdout: bytes) -> tuple[set[str], dict[str, str]]:
    """The names of a job's variables, and its mounts (LOOK's line)."""
    data = json.loads(stdout.decode().strip().splitlines()[-1])
    return set(data["env"]), dict(data["mounts"])


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in JUDGES.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def command(tmp_path: Path) -> Path:
    """A console script that looks, as a build's environment holds one."""
    bin_dir = tmp_path / "env" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "look"
    script.write_text(f"#!{sys.executable} -I\n{LOOK}", "utf-8")
    script.chmod(0o755)
    return script


def test_the_documented_scenes_are_the_ones_the_gate_builds() -> None:
    scenes = documented()
    assert set(scenes) == {"gate", "pytest", "user", "build"}
    home = Path("/home")
    assert set(gate_env(home, home, home)) == scenes["gate"]


@pytest.mark.usefixtures("judged")
def test_a_case_sees_the_gates_variables_and_no_judges(command: Path, tmp_path: Path) -> None:
    case = parse_case(
        {"id": "look", "argv": [], "env": {"MINE": "1"}, "compare": ["exit_code"]}, 0, DOC, 10.0
    )
    (tmp_path / "scratch").mkdir()
    run = run_case(command, case, tmp_path, Scratch(tmp_path / "scratch"))
    assert seen(run.stdout.head)[0] == documented()["gate"] | {"MINE"}


@pytest.mark.usefixtures("judged")
def test_a_perturbed_case_sees_a_users_variables(command: Path, tmp_path: Path) -> None:
    case = parse_case({"id": "look", "argv": [], "compare": ["exit_code"]}, 0, DOC, 10.0)
    how = Perturbation(("env", "files"))
    run = run_perturbed(Job(command, case, how), tmp_path, tmp_path)
    assert seen(run.stdout.head)[0] == documented()["user"]


@pytest.mark.usefixtures("judged")
@pytest.mark.parametrize("confined", [True, False], ids=["crossrun", "oracle"])
def test_a_pytest_run_sees_the_gates_variables_and_its_plugins(
    tmp_path: Path, confined: bool
) -> None:
    """Confined (the crossrun, the inventory's runs) and not (the oracle's own pytest, whose
    worker starts from it) alike."""
    out = tmp_path / "out"
    out.mkdir()
    root = tmp_path / "tree"
    (root / "tests").mkdir(parents=True)
    test = f"import os, pathlib\n\ndef test_look():\n    pathlib.Path({str(out / 'env')!r})"
    test += f".write_text(' '.join(sorted({STARTED})))\n"
    (root / "tests" / "test_look.py").write_text(test, "utf-8")
    how = PytestOptions(timeout=120, own_config=True, writable=(out,), confined=confined)
    run = run_pytest(Path(sys.executable), root, ["tests"], how)
    assert run.outcomes == {"tests/test_look.py::test_look": "passed"}, run
    assert set((out / "env").read_text().split()) == documented()["pytest"]


@pytest.mark.usefixtures("judged")
def test_the_subject_worker_sees_the_gates_variables(tmp_path: Path) -> None:
    """Started as the subject plugin starts it: the launcher by its command line, in the
    scene's environment."""
    scene = WorkerScene.own(str(tmp_path), Path(sys.executable).parent)
    status = tmp_path / "status"
    cmd = confine.command([sys.executable, "-I", "-c", LOOK], [str(tmp_path)], str(status), True)
    done = subprocess.run(cmd, env=scene.env, capture_output=True, check=True)
    assert seen(done.stdout)[0] == documented()["gate"]


@pytest.mark.usefixtures("judged")
def test_a_collection_and_a_build_see_their_documented_variables(tmp_path: Path) -> None:
    python = Path(sys.executable)
    env = collection_env(False, tmp_path, python)
    done = run_confined([python, "-I", "-c", LOOK], writable=[tmp_path], timeout=30, env=env)
    collect = documented()["gate"] | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD"}
    assert seen(done.stdout.head)[0] == collect
    scratch = tmp_path / "build"
    scratch.mkdir()
    built = run_build([str(python), "-I", "-c", LOOK], "look", scratch, see=[])
    judges = {"LANG"}  # of BUILD_PASS_THROUGH, what this judge has (JUDGES)
    assert seen(built.stdout.head)[0] == documented()["build"] | judges
    assert set(build_variables()) == {"PATH", "LANG"}


def test_a_job_has_mounts_of_its_own_over_the_machines_services(tmp_path: Path) -> None:
    """The documented folders are empty file systems of the job's own; beneath them only
    its scratch is bound back (what it names)."""
    env = gate_env(tmp_path, tmp_path)
    done = run_confined(
        [sys.executable, "-I", "-c", LOOK], writable=[tmp_path], timeout=30, env=env
    )
    mounts = seen(done.stdout.head)[1]
    covers = {
        path for path in confine.HIDDEN if Path(path).is_dir() and not Path(path).is_symlink()
    }
    text = DOC.read_text("utf-8")
    assert all(f"`{path}`" in text for path in covers | {"/var/run"})
    assert {path for path in covers if mounts.get(path) == "tmpfs"} == covers, mounts
    assert mounts.get("/dev/shm") == "tmpfs"
    assert mounts.get("/proc") == "proc"
    beneath = {m for m in mounts if any(m.startswith(c + "/") for c in covers)}
    # What it names: its scratch, and the working directory it starts in (the launcher's).
    named = (str(tmp_path), str(Path.cwd()))
    assert beneath, beneath
    assert all(m.startswith(named) for m in beneath), beneath
