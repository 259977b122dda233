"""Cassette cases: load and validate oracle/cases.yaml, and compare a field as a case says.

Shared by the record and replay steps, so both see a case the same way.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gate.core.config import PERTURBATIONS, load_yaml, require_mapping
from _gate.core.protocol import FailClosed

CASES = "oracle/cases.yaml"  # the CLI cases, in a tree

CASE_FIELDS = (
    "id",
    "argv",
    "stdin",
    "stdin_b64",
    "env",
    "env_remove",
    "cwd",
    "timeout",
    "compare",
    "noise",
    "expect_crash",
    "perturb",
)
NOISE_FIELDS = ("pointer", "regex", "replace", "stream")
SIMPLE_SPECS = (
    "exit_code",
    "stdout.raw",
    "stderr.raw",
    "stdout.sha256",
    "stderr.sha256",
    "stdout.json",
    "stdout.jsonl",
    "stdout.additive",
    "stderr.additive",
)
# Help-like text a patch may add to: it holds while the recorded text's words stay, in order.
ADDITIVE_SPECS = ("stdout.additive", "stderr.additive")
POINTER_SPEC = "stdout.json.pointer:"
FILES_SPEC = "files:"
HEAD_SHOWN = 4096  # bytes of a capped or non-UTF-8 stream shown in reports
MISSING = {"$missing": True}
NOISE_MARK = "<noise>"


@dataclass(frozen=True)
class Noise:
    """A normalizer applied identically at record and replay: a JSON pointer or a regex."""

    pointer: str | None = None
    regex: re.Pattern[bytes] | None = None
    replace: bytes = b""
    streams: tuple[str, ...] = ("stdout", "stderr")


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    stdin: bytes
    env: tuple[tuple[str, str], ...]
    env_remove: tuple[str, ...]
    cwd: str | None
    timeout: float
    compare: tuple[str, ...]
    noise: tuple[Noise, ...]
    digest: str
    expect_crash: bool = False  # a Python traceback is this case's contract, not a broken base
    # Perturbations (perturb.py) the case opts out of, each with its reason.
    unperturbed: tuple[tuple[str, str], ...] = ()

    def perturbations(self, names: Sequence[str]) -> list[str]:
        """Which of `names` this case runs under: all but those it opts out of."""
        skipped = dict(self.unperturbed)
        return [name for name in names if name not in skipped]


def valid_pointer(pointer: str) -> bool:
    """RFC 6901: empty, or '/'-prefixed tokens where '~' is only ever '~0' or '~1'."""
    if pointer == "":
        return True
    return pointer.startswith("/") and all(
        part.replace("~0", "").replace("~1", "").find("~") < 0 for part in pointer[1:].split("/")
    )


def pointer_get(doc: Any, pointer: str) -> Any:
    cur = doc
    for raw in pointer[1:].split("/") if pointer else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and (part == "0" or part[0] != "0"):
            if int(part) >= len(cur):
                return MISSING
            cur = cur[int(part)]
        else:
            return MISSING
    return cur


def holds(spec: str, recorded: Any, observed: Any) -> bool:
    """Whether `observed` keeps the contract `recorded` holds a field to: equality, but for an
    additive field, text keeping every whitespace-separated word of the recorded text, in
    order (words only added). argparse answers an added option so: the usage line grows and
    re-wraps, the help column moves, descriptions re-wrap; all of it only moves whitespace,
    while a removed, renamed or reworded option loses a word. A stream kept as a digest (capped
    or not UTF-8) is held to equality."""
    if spec in ADDITIVE_SPECS and isinstance(recorded, str) and isinstance(observed, str):
        return _subsequence(_words(recorded), _words(observed))
    return bool(recorded == observed)


WRAPPED_HYPHEN = re.compile(r"-\s+")
# A word, or one of the marks argparse lists choices and options with: `{create,put}` is the
# words create and put, so a new choice (`{create,put,delete}`) only adds words.
WORD = re.compile(r"[{}\[\](),|]|[^\s{}\[\](),|]+")


def _words(text: str) -> list[str]:
    """The words of help text, wherever it wraps: argparse wraps help with textwrap, which also
    breaks after a hyphen (`--max-` / `supported-python`), so whitespace after one is dropped."""
    return WORD.findall(WRAPPED_HYPHEN.sub("-", text))


def _subsequence(words: Sequence[str], within: Sequence[str]) -> bool:
    rest = iter(within)
    return all(word in rest for word in words)  # `in` consumes the iterator up to the match


ADDED_SHOWN = 40  # added lines kept in a report


def added_lines(recorded: str, observed: str) -> list[str]:
    """The lines of `observed` that are new, for display: lines are matched with their
    whitespace collapsed, so a realigned column is no change and a re-wrapped line shows as new."""
    lines = observed.splitlines()
    old, new = (
        [" ".join(line.split()) for line in text] for text in (recorded.splitlines(), lines)
    )
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    found = [
        lines[index].rstrip()
        for tag, _, _, start, end in matcher.get_opcodes()
        if tag in ("insert", "replace")
        for index in range(start, end)
        if new[index]
    ]
    return found[:ADDED_SHOWN]


def _spec_error(spec: object) -> str | None:
    if not isinstance(spec, str):
        return f"compare spec {spec!r} is not a string"
    if spec in SIMPLE_SPECS:
        return None
    if spec.startswith(POINTER_SPEC):
        pointer = spec[len(POINTER_SPEC) :]
        return None if valid_pointer(pointer) else f"{pointer!r} is not an RFC 6901 pointer"
    if spec.startswith(FILES_SPEC) and spec[len(FILES_SPEC) :]:
        return None
    known = ", ".join((*SIMPLE_SPECS, POINTER_SPEC + "/a/b", FILES_SPEC + "GLOB"))
    return f"unknown compare spec {spec!r}; known: {known}"


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def parse_case(raw: Any, index: int, path: Path, default_timeout: float) -> Case:
    case_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(case_id, str) or not case_id:
        raise FailClosed(f"{path}: case #{index + 1}: field 'id' must be a non-empty string")
    where = f"{path}: case {case_id!r}"
    data = require_mapping(raw, where, CASE_FIELDS)
    bad = wrong_fields(data, where)
    if bad:
        raise FailClosed("; ".join(bad))
    if "stdin" in data and "stdin_b64" in data:
        raise FailClosed(f"{where}: give 'stdin' or 'stdin_b64', not both")
    for spec in data["compare"]:
        error = _spec_error(spec)
        if error:
            raise FailClosed(f"{where}: {error}")
    cwd = data.get("cwd")
    if cwd is not None and (Path(cwd).is_absolute() or ".." in Path(cwd).parts):
        raise FailClosed(f"{where}: 'cwd' must be a folder under fixtures/, got {cwd!r}")
    try:
        stdin = base64.b64decode(data["stdin_b64"], validate=True) if "stdin_b64" in data else None
    except ValueError:
        raise FailClosed(f"{where}: 'stdin_b64' is not valid base64") from None
    noise = tuple(
        parse_noise(item, f"{where}: noise #{i + 1}")
        for i, item in enumerate(data.get("noise") or [])
    )
    unperturbed = parse_opt_outs(data.get("perturb") or {}, where)
    canonical = json.dumps(data, sort_keys=True, ensure_ascii=True)
    return Case(
        id=case_id,
        argv=tuple(data["argv"]),
        stdin=stdin if stdin is not None else str(data.get("stdin", "")).encode("utf-8"),
        env=tuple(sorted((str(k), str(v)) for k, v in (data.get("env") or {}).items())),
        env_remove=tuple(data.get("env_remove", [])),
        cwd=cwd,
        timeout=float(data.get("timeout", default_timeout)),
        compare=tuple(data["compare"]),
        noise=noise,
        digest=hashlib.sha256(canonical.encode()).hexdigest(),
        expect_crash=bool(data.get("expect_crash", False)),
        unperturbed=unperturbed,
    )


def wrong_fields(data: dict[str, Any], where: str) -> list[str]:
    """One line per field of a case that is not of its kind (each names the field, the kind
    and what it holds)."""
    timeout = data.get("timeout", 1)
    problems = {
        "argv": ("a list of strings", not _str_list(data.get("argv"))),
        "stdin": ("a string", not isinstance(data.get("stdin", ""), str)),
        "stdin_b64": ("a base64 string", not isinstance(data.get("stdin_b64", ""), str)),
        "env": (
            "a mapping of names to strings",
            not isinstance(data.get("env", {}), dict)
            or not all(isinstance(v, (str, int, float)) for v in (data.get("env") or {}).values()),
        ),
        "env_remove": ("a list of strings", not _str_list(data.get("env_remove", []))),
        "cwd": ("a folder under fixtures/, as a string", not isinstance(data.get("cwd", ""), str)),
        "timeout": (
            "a number of seconds above 0",
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0,
        ),
        "compare": (
            "a non-empty list of specs",
            not isinstance(data.get("compare"), list) or not data.get("compare"),
        ),
        "noise": ("a list", not isinstance(data.get("noise", []), list)),
        "expect_crash": ("true or false", not isinstance(data.get("expect_crash", False), bool)),
        "perturb": ("a mapping", not isinstance(data.get("perturb", {}), dict)),
    }
    return [
        f"{where}: field {name!r} must be {kind}, "
        + (f"not {data[name]!r}" if name in data else "and is missing")
        for name, (kind, wrong) in problems.items()
        if wrong
    ]


def parse_opt_outs(raw: dict[Any, Any], where: str) -> tuple[tuple[str, str], ...]:
    """`perturb: {clock: "prints today's date"}`: each opt-out names a perturbation and why."""
    for name, reason in raw.items():
        if name not in PERTURBATIONS:
            known = ", ".join(PERTURBATIONS)
            raise FailClosed(f"{where}: perturb: unknown perturbation {name!r}; known: {known}")
        if not isinstance(reason, str) or not reason.strip():
            raise FailClosed(
                f"{where}: perturb: {name}: give the reason the case opts out, as a string"
            )
    return tuple(sorted((str(name), str(reason)) for name, reason in raw.items()))


def parse_noise(raw: Any, where: str) -> Noise:
    data = require_mapping(raw, where, NOISE_FIELDS)
    pointer, regex = data.get("pointer"), data.get("regex")
    if (pointer is None) == (regex is None):
        raise FailClosed(f"{where}: give exactly one of 'pointer' or 'regex'")
    if pointer is not None:
        if not isinstance(pointer, str) or not valid_pointer(pointer) or not pointer:
            raise FailClosed(f"{where}: {pointer!r} is not an RFC 6901 pointer")
        return Noise(pointer=pointer)
    stream = data.get("stream", "both")
    if stream not in ("stdout", "stderr", "both"):
        raise FailClosed(f"{where}: 'stream' must be stdout, stderr or both")
    try:
        pattern = re.compile(str(regex).encode("utf-8"))
    except re.error as exc:
        raise FailClosed(f"{where}: invalid regex {regex!r} ({exc})") from None
    streams = ("stdout", "stderr") if stream == "both" else (stream,)
    replace = str(data.get("replace", NOISE_MARK)).encode("utf-8")
    return Noise(regex=pattern, replace=replace, streams=streams)


def load_cases(path: Path, default_timeout: float = 10.0) -> list[Case]:
    raw = require_mapping(load_yaml(path) or {"cases": []}, str(path), ("cases",))
    items = raw.get("cases") or []
    if not isinstance(items, list):
        raise FailClosed(f"{path}: field 'cases' must be a list")
    cases, problems = [], []
    for index, item in enumerate(items):  # every bad case at once, not the first alone
        try:
            cases.append(parse_case(item, index, path, default_timeout))
        except FailClosed as exc:
            problems.append(str(exc))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            problems.append(f"{path}: case {case.id!r}: duplicate id; ids must be unique")
        seen.add(case.id)
    if problems:
        raise FailClosed("; ".join(problems))
    return cases
