"""Oracle strength: mutate the code with mutmut and ask which evidence kills each mutant.

    python scripts/strength.py [--tree .] [--only GLOB ...] [--mutants NAME ...] [--propose N]
    python scripts/strength.py --update-ref          # measure, then store the score
    python scripts/strength.py --shard I/N --report reports/strength-I.json   # one CI runner
    python scripts/strength.py --merge reports/strength-*.json    # the shards as one report
    python scripts/strength.py --store reports/strength.json   # store an earlier run's score

Runs in the `strength` session's environment: the project, its judge requirements and mutmut
(scripts/requirements-strength.txt), from the wheelhouse. mutmut 3 writes every mutant of the
code under `strength_paths` (oracle/judge.yaml) into one copy of it, each behind a trampoline
that picks the mutant named by $MUTANT_UNDER_TEST when the function is called, and runs for
each mutant only the tests that reach its function, each in a process forked for it, on all
cores. Three mutmut runs, each in a copy of the tree of its own, ask three kinds of evidence,
each about the mutants the kinds before it did not kill (a kill is a kill whichever kind made
it: the score is the same, and each column of the report counts the mutants its kind killed
that the kinds before it missed, so the columns add up to the mutants):

- properties: the tests of oracle/, calling the adapter in process (`--subject-inprocess`);
- cassettes: a test per case of oracle/cases.yaml (_gate/strength/strength_cassettes.py) that runs
  the console script's entry point against the mutant, in a child forked from mutmut's worker
  (out of process where the fork does not answer as a new interpreter), and compares the
  case's fields with a recording of the unmutated build made first. Second: a mutant costs
  the cassettes a case per run until one kills it, every case that reaches it when none does,
  and the properties kill in a few examples most of what they reach;
- tests: the project's own tests (`tests:`), for comparison: a mutant only they kill is where
  the oracle is blind.

Writes reports/strength.json (score, counts per file and function, every mutant the oracle
misses with its file, line and mutated code), reports/strength.md, and
reports/proposed-cases.yaml: cases that tell missed mutants apart (_gate/strength/proposals.py), for
a maintainer to review. The score is the share of mutants the cassettes or the properties
kill; --update-ref (or --store) commits it to the oracle ref as strength.json, where the
judge's summary shows it and `strength_min` reads it. A run narrowed by --only, --mutants or
--kinds is never stored. --shard I/N measures the mutants of the functions shard I owns (by a
hash of each function's name, _gate/plugin/shard.py), so N runners split the work; --merge joins
their reports, every shard 1..N once, into the report one run would have written.
Exit codes: 0 measured, 2 fail closed (no mutmut here, nothing to mutate, evidence that fails
on the unmutated code, a mutmut run that broke, a partial measurement to store).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from fnmatch import fnmatch
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from _gate.core.config import Config, load_config
from _gate.core.protocol import (
    EXIT_CODES_HELP,
    PASS,
    FailClosed,
    Outcome,
    add_report_arg,
    read_report,
)
from _gate.plugin.confine import Reach
from _gate.plugin.patch_env import gate_env
from _gate.plugin.shard import add_shard_arg
from _gate.runs.cases import Case, load_cases
from _gate.runs.cassettes import record
from _gate.runs.entry import run_main
from _gate.runs.envs import bin_dir
from _gate.runs.git import SCORE_FILE, commit_file, git, resolve_oracle_ref
from _gate.runs.oracle_run import has_tests
from _gate.runs.sandbox import at_home, probe_sandbox, require_sandbox, run_confined
from _gate.strength.mutants import function_keys, located
from _gate.strength.proposals import Search, as_yaml, propose
from _gate.strength.score import markdown, merged, missed_by_oracle, tally

KINDS = ("cassettes", "properties", "tests")
NO_TESTS = 33
# How mutmut 3 stops when the selected tests reach no mutated function: for strength, a kind of
# evidence that kills nothing there, not a broken run.
NOT_REACHED = "could not find any test case for any mutant"
# How mutmut 3 stops when --mutants matches none of its mutants (a shard whose functions have
# none): no mutant to judge.
NOTHING_MATCHES = "Filtered for specific mutants, but nothing matches"
# mutmut's defaults: a mutant times out after (estimated + constant) x multiplier s.
MUTMUT_TIMEOUT_CONSTANT, MUTMUT_TIMEOUT_MULTIPLIER = 1.0, 15.0
NO_MUTANT = "-"  # a pattern that names no mutant: a shard that owns no function
COPIED = ("oracle", "scripts", "fixtures")  # what the evidence reads, beside the code
SURVIVORS_SHOWN = 10
PROPOSED_HEADER = """Proposed by `nox -s strength` on {date}: each case tells a mutant the oracle
misses from the code, and compares only fields that were stable over two runs. Review each;
copy the ones you want into oracle/cases.yaml (nothing edits the oracle for you).
"""


def mutmut_table(
    config: Config,
    only: Sequence[str],
    selection: Sequence[str],
    options: Sequence[str],
    timeout_constant: float,
) -> str:
    """The [tool.mutmut] table of one run (JSON strings are TOML basic strings). mutmut runs
    the tests from its copy: the tests and what they read are copied beside the code."""
    rows: dict[str, object] = {
        "source_paths": list(config.strength_paths),
        "only_mutate": list(only),
        "also_copy": [*COPIED, *config.tests],
        "pytest_add_cli_args_test_selection": list(selection),
        "pytest_add_cli_args": ["-p", "no:cacheprovider", *options],
        "timeout_constant": timeout_constant,
    }
    return "\n[tool.mutmut]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in rows.items())


def copy_tree(tree: Path, dest: Path, table: str) -> Path:
    ignore = shutil.ignore_patterns(".git", ".nox", ".oracle", "reports", "mutants", "__pycache__")
    shutil.copytree(tree, dest, ignore=ignore, symlinks=True)
    pyproject = dest / "pyproject.toml"
    text = pyproject.read_text("utf-8") if pyproject.is_file() else ""
    if any(line.strip() == "[tool.mutmut]" for line in text.splitlines()):
        raise FailClosed(
            f"{tree / 'pyproject.toml'}: has a [tool.mutmut] table; strength configures mutmut "
            "itself: name the code to mutate in oracle/judge.yaml `strength_paths` and remove it"
        )
    pyproject.write_text(text + table, "utf-8")
    return dest


def recording(tree: Path, config: Config, command: Path, cases: Sequence[Case], tmp: Path) -> Path:
    """The cases recorded on the unmutated build, as the record step records them (only the
    fields stable over its runs), for the cassette tests; and the level the launcher confines
    the mutmut runs at here: the cassette tests fork a case from mutmut's worker only inside
    that confinement (scripts/_gate/strength/strength_cassettes.py)."""
    fixtures = tree / "fixtures"
    cassette = record(command, cases, fixtures, "")["cases"]
    level = probe_sandbox().level
    found = {
        "command": str(command),
        "command_name": config.command,
        "cases": str(tree / "oracle" / "cases.yaml"),
        "fixtures": str(fixtures),
        "expected": {case_id: row["fields"] for case_id, row in cassette.items()},
        "confined": level if level != "none" else "",
    }
    path = tmp / "recording.json"
    path.write_text(json.dumps(found), "utf-8")
    return path


def mutated_roots(copy: Path) -> str:
    """Where the mutated code imports from: what mutmut puts first on its own sys.path."""
    return os.pathsep.join(str(copy / "mutants" / part) for part in ("source", "src", "."))


MUTMUT_TIMEOUT = 6 * 3600.0  # seconds for one kind of evidence over every mutant


def timeout_constant(kind: str, cases: Sequence[Case], config: Config) -> float:
    """mutmut's timeout_constant for one kind of evidence: its default, but for the cassette
    tests. mutmut times a mutant out after (estimated + constant) x 15 s of wall clock,
    estimated from its coverage pass, where the cases run in process and take milliseconds;
    replayed, each may take its case_timeout, after which it fails (a kill) by itself. With
    the default (1 s: about 15 s a mutant), a loaded machine could time out a mutant whose
    cases were only slow, a kill that is not one; this bound never ends a mutant before its
    cases' own timeouts could."""
    if kind != "cassettes":
        return MUTMUT_TIMEOUT_CONSTANT
    return round(len(cases) * config.case_timeout / MUTMUT_TIMEOUT_MULTIPLIER + 1, 1)


def run_mutmut(
    copy: Path,
    kind: str,
    args: argparse.Namespace,
    patterns: Sequence[str],
    *,
    env: dict[str, str],
    see: Sequence[Path],
) -> dict[str, int | None]:
    """mutmut run in `copy`: the exit code of every mutant (None: not run), by mutant name;
    `see`: what its runs read that they do not name (the recording's build and tree)."""
    jobs = args.jobs or os.cpu_count() or 1
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *patterns]
    # The mutants run the tree's code: confined to the copy like the rest of it.
    scratch = copy.parent / f"{copy.name}-tmp"
    scratch.mkdir(exist_ok=True)
    done = run_confined(
        command,
        writable=[copy, scratch],
        timeout=MUTMUT_TIMEOUT,
        cwd=copy,
        env=at_home(env, scratch),
        cap=1 << 24,
        reach=Reach(see=tuple(str(path) for path in see)),
    )
    results: dict[str, int | None] = {}
    for meta in sorted((copy / "mutants").rglob("*.py.meta")):
        results.update(json.loads(meta.read_text("utf-8"))["exit_code_by_key"])
    tail = (done.stdout.head + done.stderr.head).decode("utf-8", "replace").replace("\r", "\n")
    if done.timed_out:
        raise FailClosed(f"mutmut on the {kind} evidence did not end within {MUTMUT_TIMEOUT:g} s")
    if done.exit_code != 0 and results and NOT_REACHED in tail:
        return dict.fromkeys(results, NO_TESTS)  # this evidence reaches no mutated function
    if done.exit_code != 0 and NOTHING_MATCHES in tail:
        return {}
    if done.exit_code != 0 or not results:
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit {done.exit_code}"
        raise FailClosed(
            f"mutmut on the {kind} evidence ended {done.exit_code} with {len(results)} mutants "
            f"({why}); run it in a copy of the tree: `python -m mutmut run`"
        )
    return results


# The oracle's evidence runs as the judge runs it: no plugin autoloaded (pytest_run.py). Nor
# the plugins that look for exceptions no test raised: in the judge the code under test runs in
# another process, where they never see one; here each would collect the garbage of the whole
# worker twice at the end of every mutant's session (a third of a killed mutant's time).
OWN_PYTEST = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
OWN_PLUGINS_OFF = ["-p", "no:unraisableexception", "-p", "no:threadexception"]


def evidence_runs(
    tree: Path, config: Config, recording: Path | None
) -> list[tuple[str, list[str], list[str], dict[str, str]]]:
    """(kind, test selection, pytest options, environment) of each kind of evidence there is."""
    runs: list[tuple[str, list[str], list[str], dict[str, str]]] = []
    if has_tests(tree / "oracle"):
        options = ["-c", "oracle/pytest.ini", "-p", "_gate.plugin.subject", "--subject-inprocess"]
        options += ["--subject-adapter", "oracle/adapter.py", *OWN_PLUGINS_OFF]
        runs.append(("properties", ["oracle"], options, dict(OWN_PYTEST)))
    if recording is not None:
        env = {"ORACLE_STRENGTH_RECORDING": str(recording), **OWN_PYTEST}
        # The cassette tests make their own folders: no tmp_path, whose plugin numbers and
        # prunes a folder per session, a session per mutant.
        options = [*OWN_PLUGINS_OFF, "-p", "no:tmpdir"]
        runs.append(("cassettes", ["scripts/_gate/strength/strength_cassettes.py"], options, env))
    runs.append(("tests", list(config.tests), [], {}))
    return runs


def shard_patterns(args: argparse.Namespace, tree: Path, config: Config) -> list[str]:
    """--shard I/N: the mutants of the functions shard I owns (a function's mutants stay
    together, so mutmut still runs only the tests that reach it)."""
    owned = args.shard.pick(function_keys(tree, config.strength_paths, args.only), str)
    return [f"{key}__mutmut_*" for key in owned]


def checked(args: argparse.Namespace) -> tuple[Path, Config, Path]:
    """The tree, its settings and the console script to measure, or one line saying why not."""
    tree = args.tree.resolve()
    config = load_config(tree / "oracle" / "judge.yaml")
    require_sandbox(config.sandbox == "required")
    missing = [p for p in config.strength_paths if not (tree / p).exists()]
    if missing:
        raise FailClosed(
            f"{tree / 'oracle/judge.yaml'}: strength_paths names {missing[0]!r}, which is not "
            "in the tree; name the folders or files of the code to mutate"
        )
    if not args.shard.whole and args.mutants:
        raise FailClosed("--shard picks the mutants itself: pass --shard or --mutants, not both")
    if find_spec("mutmut") is None:
        raise FailClosed("mutmut is not installed in this environment; run `nox -s strength`")
    command = bin_dir(Path(sys.prefix)) / config.command
    if not command.is_file():
        raise FailClosed(f"{command}: no console script {config.command!r}; install the project")
    return tree, config, command


def reached(copy: Path) -> dict[str, list[str]]:
    """Function (mutmut's name) -> the cases whose run reaches it, from mutmut's coverage pass."""
    try:
        stats = json.loads((copy / "mutants" / "mutmut-stats.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    found = stats.get("tests_by_mangled_function_name") or {}
    return {
        function: sorted(test.rpartition("[")[2].rstrip("]") for test in tests)
        for function, tests in found.items()
    }


def measure(
    args: argparse.Namespace, tree: Path, config: Config, command: Path, patterns: Sequence[str]
) -> dict[str, Any]:
    """Every kind of evidence against every mutant `patterns` name (none: all of them); the
    report, with proposed cases."""
    results: dict[str, dict[str, int | None]] = {}
    seconds: dict[str, float] = {}
    cases_file = tree / "oracle" / "cases.yaml"
    cases = load_cases(cases_file, config.case_timeout) if cases_file.is_file() else []
    with tempfile.TemporaryDirectory(prefix="oracle-strength-") as name:
        tmp = Path(name)
        recorded = recording(tree, config, command, cases, tmp) if cases else None
        copy = tmp
        for kind, selection, options, extra in evidence_runs(tree, config, recorded):
            if kind not in args.kinds:
                continue
            names = list(patterns)
            if results:  # each kind runs on the mutants the kinds before it missed
                names = missed_by_oracle(results, patterns)
                if not names:
                    results[kind] = {}
                    continue
            constant = timeout_constant(kind, cases, config)
            plugin = ["-p", "_gate.strength.strength_plugin", *options]
            table = mutmut_table(config, args.only, selection, plugin, constant)
            copy = copy_tree(tree, tmp / kind, table)
            # Bytecode on: each mutant starts the console script again, and compiling the
            # mutated modules (every mutant of a file is in it) would dominate each start.
            env = gate_env(tmp, tmp, Path(sys.executable).parent)  # HOME, TMPDIR: run_mutmut's
            env.pop("PYTHONDONTWRITEBYTECODE")
            # The plugins, from mutmut's copy of the scripts: the cassette tests are collected
            # there. Made now: Python skips for good a path folder missing when it starts.
            plugins = copy / "mutants" / "scripts"
            plugins.mkdir(parents=True)
            env.update(extra, ORACLE_STRENGTH_MUTATED=mutated_roots(copy), PYTHONPATH=str(plugins))
            started = time.monotonic()
            results[kind] = run_mutmut(copy, kind, args, names, env=env, see=(tree, command))
            seconds[kind] = round(time.monotonic() - started, 2)
        files = {
            mutant: meta.relative_to(copy / "mutants").as_posix().removesuffix(".meta")
            for meta in (copy / "mutants").rglob("*.py.meta")
            for mutant in json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
            if not patterns or any(fnmatch(mutant, p) for p in patterns)
        }
        report = tally(results, located(copy, tree, files))
        proposals: list[dict[str, Any]] = []
        if "cassettes" in results and args.propose:
            started = time.monotonic()
            search = Search(command, mutated_roots(tmp / "cassettes"), tree / "fixtures")
            reach = reached(tmp / "cassettes")
            # A mutant the project's tests kill is observable: the first worth a proposal.
            missed = sorted(report["missed"], key=lambda row: row["verdict"] != "only_tests")
            by_id = {case.id: case for case in cases}
            proposals = propose(missed, reach, by_id, search, args.propose)
            seconds["propose"] = round(time.monotonic() - started, 2)
    return {**report, "kinds": sorted(results), "seconds": seconds, "proposals": proposals}


def store(tree: Path, config: Config, report: dict[str, Any], today: dt.date) -> str:
    """The score, on the oracle ref beside the ledger: what the judge shows and strength_min
    reads. Only a whole measurement is a score."""
    if report.get("partial", True):
        raise FailClosed(
            "a partial measurement (--only, --mutants or --kinds) is not the oracle's score; "
            "measure every mutant with every kind of evidence"
        )
    score = {key: report[key] for key in ("score", "totals", "kinds", "base")}
    text = json.dumps({"date": today.isoformat(), **score}, indent=2) + "\n"
    total = report["totals"].get("mutants", 0)
    message = f"oracle strength {today}: {report['score']:.1%} of {total} mutants"
    source = resolve_oracle_ref(tree, config.oracle_ref)
    return commit_file(tree, config.oracle_ref, source, SCORE_FILE, text=text, message=message)


def stored(args: argparse.Namespace) -> Outcome:
    """--store: commit the score of a report written by an earlier run (CI: the strength job's,
    in the one job that may push the oracle ref)."""
    report = read_report(args.store).evidence
    if not isinstance(report.get("score"), (int, float)) or not isinstance(
        report.get("totals"), dict
    ):
        raise FailClosed(f"{args.store}: not a strength report; run `nox -s strength`")
    tree = args.tree.resolve()
    config = load_config(tree / "oracle" / "judge.yaml")
    require_sandbox(config.sandbox == "required")
    commit = store(tree, config, report, args.today)
    return Outcome(
        PASS, f"score {report['score']:.1%} committed to {config.oracle_ref} at {commit[:12]}"
    )


def execute(args: argparse.Namespace) -> Outcome:
    if args.store:
        return stored(args)
    if args.merge:
        return written(args, merged(args.merge), "merged")
    tree, config, command = checked(args)
    partial = bool(args.only or args.mutants or set(args.kinds) != set(KINDS))
    patterns = args.mutants
    if not args.shard.whole:
        patterns = shard_patterns(args, tree, config) or [NO_MUTANT]
    report = measure(args, tree, config, command, patterns)
    report["partial"] = partial
    report["shard"] = {"index": args.shard.index, "count": args.shard.count}
    report["base"] = git(tree, "rev-parse", "--verify", "--quiet", "HEAD", check=False).strip()
    outcome = written(args, report, "measured")
    if args.update_ref and report["totals"].get("mutants"):
        commit = store(tree, config, report, args.today)
        outcome.summary += f"; score committed to {config.oracle_ref} at {commit[:12]}"
    return outcome


def written(args: argparse.Namespace, report: dict[str, Any], how: str) -> Outcome:
    """The report's Markdown and proposed cases written, its survivors shown, its summary."""
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.write_text(markdown(report), "utf-8")
    header = PROPOSED_HEADER.format(date=args.today)
    args.proposed.write_text(as_yaml(report["proposals"], header), "utf-8")
    totals = report["totals"]
    summary = (
        f"{report['score']:.1%} of {totals.get('mutants', 0)} mutants killed by the oracle "
        f"(properties {totals.get('properties', 0)}, cassettes {totals.get('cassettes', 0)} more); "
        f"{totals.get('only_tests', 0)} killed only by the project's tests, "
        f"{totals.get('survived', 0)} survived, {len(report['proposals'])} cases proposed "
        f"({args.proposed}); see {args.markdown}"
    )
    for row in report["missed"][:SURVIVORS_SHOWN]:
        print(f"missed {row['file']}:{row['line']} {row['function']}: {row['code']}")
    shard = report.get("shard") or {}
    if shard.get("count", 1) > 1:
        summary = f"shard {shard['index']}/{shard['count']}: {summary}"
    return Outcome(PASS, f"{how}: {summary}", report)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=EXIT_CODES_HELP)
    p.add_argument("--tree", type=Path, default=Path("."), help="the tree to measure (default .)")
    p.add_argument("--jobs", type=int, default=0, help="mutants at once (default: the CPUs)")
    p.add_argument("--only", nargs="+", default=[], metavar="GLOB", help="mutate only these files")
    p.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=list(KINDS),
        help="the evidence to ask (default: all three)",
    )
    p.add_argument(
        "--mutants",
        nargs="+",
        default=[],
        metavar="NAME",
        help="judge only these mutants (names or fnmatch patterns, as the report lists them)",
    )
    add_shard_arg(p)
    p.add_argument(
        "--merge", nargs="+", type=Path, metavar="REPORT", help="merge the reports of shards"
    )
    p.add_argument("--markdown", type=Path, default=Path("reports/strength.md"))
    p.add_argument("--proposed", type=Path, default=Path("reports/proposed-cases.yaml"))
    p.add_argument(
        "--propose", type=int, default=10, metavar="N", help="cases to propose at most (0: none)"
    )
    p.add_argument("--update-ref", action="store_true", help="store the score on the oracle ref")
    p.add_argument(
        "--store", type=Path, metavar="REPORT", help="only store this report's score (CI)"
    )
    p.add_argument("--today", type=dt.date.fromisoformat, default=dt.date.today())
    add_report_arg(p, "strength")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("strength", parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
