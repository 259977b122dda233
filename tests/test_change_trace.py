"""Change coverage's tracer (_gate/plugin/change_trace.py, read by _gate/runs/traced.py): real
console scripts run by a real interpreter, traced as the judge traces a case of the patch's
build. A run says which changed lines it ran and nothing else; what it cannot hide is a tracer
it removed, or a line of coverage it wrote itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _gate.core.context import ChangedFile
from _gate.runs.traced import Coverage, Trace, read_trace, traced_command

MODULE = """\
import os
import sys


def main():
    total = 1
    if len(sys.argv) > 2:
        total = 2  # line 8: only with two arguments
    {body}
    print("total", total)
    return 0
"""


def program(tmp: Path, body: str = "pass") -> tuple[Path, ChangedFile]:
    """A package module and its console script, as a build installs them."""
    (tmp / "pkg").mkdir()
    module = tmp / "pkg" / "mod.py"
    module.write_text(MODULE.format(body=body), "utf-8")
    script = tmp / "bin" / "tool"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(tmp)!r})\n"
        "from pkg.mod import main\nif __name__ == '__main__':\n    sys.exit(main())\n",
        "utf-8",
    )
    script.chmod(0o755)
    return script, ChangedFile(str(module.resolve()), "src/pkg/mod.py", (6, 7, 8, 9, 10))


def traced_run(
    script: Path, argv: list[str], changed: ChangedFile, tmp: Path, *, tests: bool = False
) -> tuple[subprocess.CompletedProcess[str], Coverage]:
    trace = Trace((changed,), "case one", tests)
    with traced_command(script, argv, tmp, trace) as traced:
        assert traced.found is not None
        done = subprocess.run(traced.cmd, capture_output=True, text=True, check=False)
        coverage = traced.coverage()
    assert coverage is not None
    return done, coverage


def test_a_run_names_the_changed_lines_it_ran_and_no_other(tmp_path: Path) -> None:
    script, changed = program(tmp_path)
    done, coverage = traced_run(script, ["a"], changed, tmp_path)
    assert (done.returncode, done.stdout) == (0, "total 1\n"), done.stderr
    ran = {line: ["case one"] for line in (6, 7, 9, 10)}  # 8 needs two arguments
    assert coverage.hits == {"src/pkg/mod.py": ran}
    assert (coverage.tampered, coverage.unfinished) == ([], 0)
    _, both = traced_run(script, ["a", "b"], changed, tmp_path)
    assert 8 in both.hits["src/pkg/mod.py"]


# What a program can see of how it was started, printed: click names itself `python -m x`
# when `__main__` has a package, which a runpy-started script has ("").
STARTED = (
    "main = sys.modules['__main__']; "
    "print(main.__package__, main.__spec__, main.__file__, main.__name__, sys.argv[0], "
    "sys.path[0], type(main.__loader__).__name__, sorted(vars(main))); "
    "raise ValueError(sys.argv[0]) if total > 1 else None"
)


def test_a_traced_program_is_the_program_its_script_runs(tmp_path: Path) -> None:
    """How it was started (its `__main__`, argv[0], sys.path[0]), the exit status, stdout
    and an uncaught exception's traceback are the untraced run's, byte for byte: a cassette
    compares them."""
    script, changed = program(tmp_path, STARTED)
    for argv in (["a"], ["a", "b"]):
        plain = subprocess.run([script, *argv], capture_output=True, text=True, check=False)
        done, _ = traced_run(script, argv, changed, tmp_path)
        assert (done.returncode, done.stdout, done.stderr) == (
            plain.returncode,
            plain.stdout,
            plain.stderr,
        )
    assert "ValueError: " + str(script) in plain.stderr


@pytest.mark.parametrize(
    "removal",
    [
        "sys.settrace(None)",
        "sys.settrace(lambda *a: None)",
        "__import__('threading').settrace(None)",
    ],
)
def test_a_run_that_removes_the_tracer_is_named(tmp_path: Path, removal: str) -> None:
    """The patch's code alone (a case) removed it: tampered. Where tests share the process
    (a pytest run), a test of tracing may have: its coverage is lost, not the patch's act."""
    script, changed = program(tmp_path, removal)
    _, coverage = traced_run(script, ["a"], changed, tmp_path)
    assert coverage.tampered, coverage
    assert coverage.tampered[0].startswith("case one: ")
    _, shared = traced_run(script, ["a"], changed, tmp_path, tests=True)
    assert (shared.tampered, len(shared.lost)) == ([], len(coverage.tampered)), shared


def test_a_line_the_tracer_did_not_write_is_forged(tmp_path: Path) -> None:
    """The file the tracer writes is in a folder the run may write: a line without the run's
    token, or naming a line the gate did not watch, is forged and named."""
    script, changed = program(tmp_path)
    trace = Trace((changed,), "case one")
    with traced_command(script, ["a"], tmp_path, trace) as traced:
        watched = traced.found
        assert watched is not None
        subprocess.run(traced.cmd, capture_output=True, check=False)
        with watched.out.open("a", encoding="utf-8") as out:
            out.write(f"{'0' * 32}\tcase one\t{changed.installed}\t8\n")  # a guessed token
            out.write(f"{watched.token}\tcase one\t{changed.installed}\t99\n")  # not watched
        coverage = read_trace(watched, trace)
    assert len(coverage.tampered) == 2, coverage
    assert 8 not in coverage.hits["src/pkg/mod.py"]


def test_a_run_ended_by_os_exit_keeps_what_it_ran(tmp_path: Path) -> None:
    script, changed = program(tmp_path, "os._exit(3)")
    done, coverage = traced_run(script, ["a"], changed, tmp_path)
    assert done.returncode == 3
    assert sorted(coverage.hits["src/pkg/mod.py"]) == [6, 7, 9]
    assert coverage.unfinished == 1


def test_a_program_that_is_no_python_script_runs_untraced(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho hi\n", "utf-8")
    changed = ChangedFile("/nowhere.py", "src/x.py", (1,))
    with traced_command(script, ["a"], tmp_path, Trace((changed,), "case")) as traced:
        assert (traced.cmd, traced.found, traced.writable) == ([str(script), "a"], None, ())


def test_a_branch_on_a_changed_line_is_seen_by_the_way_it_went(tmp_path: Path) -> None:
    """`a if probe() else b` runs its line whichever way it goes: the run says which way."""
    script, changed = program(tmp_path, "total = 3 if len(sys.argv) > 3 else total")
    took = lambda evidence: bool(evidence)  # noqa: E731 (every run counts here)
    _, one = traced_run(script, ["a"], changed, tmp_path)
    assert one.one_way("src/pkg/mod.py", took) == {7, 9}  # line 7's `if` went one way too
    _, other = traced_run(script, ["a", "b", "c"], changed, tmp_path)
    one.merge(other)
    assert one.one_way("src/pkg/mod.py", took) == set()


@pytest.mark.parametrize(
    "body",
    [
        "with open(os.devnull) as _: pass",  # whether `with`'s exit swallowed an exception
        "assert total < 10",  # an assert that fails
        "try: total += 0\n    except KeyError: raise",  # whether an except clause matches
    ],
)
def test_a_jump_python_adds_for_an_error_path_is_no_branch(tmp_path: Path, body: str) -> None:
    """Only a raise takes these the other way: an untested error path, never a world."""
    script, changed = program(tmp_path, body)
    _, coverage = traced_run(script, ["a"], changed, tmp_path)
    assert coverage.one_way("src/pkg/mod.py", bool) == {7}  # the `if` of line 7 alone
