"""Cassette cases: load and validate oracle/cases.yaml, run a case in isolation, observe fields.

Shared by record_cassettes.py and replay_cassettes.py so both see a case the same way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from _gate import FailClosed, load_yaml, require_mapping

CASE_FIELDS = ("id", "argv", "stdin", "stdin_b64", "env", "env_remove", "cwd", "timeout", "compare")
SIMPLE_SPECS = (
    "exit_code",
    "stdout.raw",
    "stderr.raw",
    "stdout.sha256",
    "stderr.sha256",
    "stdout.json",
    "stdout.jsonl",
)
POINTER_SPEC = "stdout.json.pointer:"
FILES_SPEC = "files:"
# The only variables a case inherits; everything else is set here or by the case itself.
PASS_THROUGH = ("PATH", "SYSTEMROOT", "TMPDIR")
FIXED_ENV = {
    "NO_COLOR": "1",
    "TZ": "UTC",
    "LC_ALL": "C.UTF-8",
    "COLUMNS": "80",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
}
OUTPUT_CAP = 1 << 20  # bytes of output kept verbatim in a cassette; beyond it, digest + head
MISSING = {"$missing": True}


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
    digest: str


@dataclass(frozen=True)
class Run:
    exit_code: int
    timed_out: bool
    stdout: bytes
    stderr: bytes
    files: dict[str, str]
    seconds: float


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
    where = f"{path}: case #{index + 1}"
    data = require_mapping(raw, where, CASE_FIELDS)
    case_id = data.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise FailClosed(f"{where}: field 'id' must be a non-empty string")
    where = f"{path}: case {case_id!r}"
    problems = {
        "argv": not _str_list(data.get("argv")),
        "stdin": not isinstance(data.get("stdin", ""), str),
        "stdin_b64": not isinstance(data.get("stdin_b64", ""), str),
        "env": not isinstance(data.get("env", {}), dict)
        or not all(isinstance(v, (str, int, float)) for v in (data.get("env") or {}).values()),
        "env_remove": not _str_list(data.get("env_remove", [])),
        "cwd": not isinstance(data.get("cwd", ""), str),
        "timeout": not isinstance(data.get("timeout", 1), (int, float))
        or isinstance(data.get("timeout"), bool)
        or float(data.get("timeout", 1)) <= 0,
        "compare": not isinstance(data.get("compare"), list) or not data.get("compare"),
    }
    bad = [name for name, wrong in problems.items() if wrong]
    if bad:
        raise FailClosed(f"{where}: field {bad[0]!r} is missing or has the wrong type")
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
        digest=hashlib.sha256(canonical.encode()).hexdigest(),
    )


def load_cases(path: Path, default_timeout: float = 10.0) -> list[Case]:
    raw = require_mapping(load_yaml(path) or {"cases": []}, str(path), ("cases",))
    items = raw.get("cases") or []
    if not isinstance(items, list):
        raise FailClosed(f"{path}: field 'cases' must be a list")
    cases = [parse_case(item, i, path, default_timeout) for i, item in enumerate(items)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise FailClosed(f"{path}: case {case.id!r}: duplicate id; ids must be unique")
        seen.add(case.id)
    return cases


def case_env(case: Case, home: Path, bin_dir: Path) -> dict[str, str]:
    env = {key: os.environ[key] for key in PASS_THROUGH if key in os.environ}
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", os.defpath)])
    env.update(FIXED_ENV, HOME=str(home))
    env.update(case.env)
    for key in case.env_remove:
        env.pop(key, None)
    return env


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _file_digests(root: Path, specs: Sequence[str]) -> dict[str, str]:
    globs = [s[len(FILES_SPEC) :] for s in specs if s.startswith(FILES_SPEC)]
    if not globs:
        return {}
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and any(fnmatchcase(rel, g) for g in globs):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_case(command: Path, case: Case, fixtures: Path) -> Run:
    """Run one case in a fresh HOME and working directory; kill its whole group on timeout."""
    with tempfile.TemporaryDirectory(prefix=f"case-{case.id[:40]}-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        if case.cwd:
            source = fixtures / case.cwd
            if not source.is_dir():
                raise FailClosed(f"case {case.id!r}: cwd fixtures/{case.cwd} is not a folder")
            shutil.copytree(source, work, symlinks=True)
        else:
            work.mkdir()
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(command), *case.argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env=case_env(case, home, command.parent),
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(case.stdin, timeout=case.timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            timed_out = True
        seconds = time.perf_counter() - start
        _kill_group(proc)  # a daemonised grandchild must not outlive its case
        files = _file_digests(work, case.compare)
    return Run(proc.returncode, timed_out, out, err, files, seconds)


def text_value(data: bytes) -> Any:
    """Bytes as JSON: text when UTF-8 and under the cap; else escaped head plus a digest."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        head = data[:4096].decode("utf-8", "backslashreplace")
        return {"$non_utf8": True, "sha256": digest, "head": head, "bytes": len(data)}
    if len(data) > OUTPUT_CAP:
        return {"$truncated": True, "sha256": digest, "head": text[:4096], "bytes": len(data)}
    return text


def _json_doc(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return {"$invalid_json": str(exc)}


def _jsonl(data: bytes) -> Any:
    return [_json_doc(line.encode()) for line in data.decode("utf-8", "replace").splitlines()]


def observe(case: Case, run: Run) -> dict[str, Any]:
    """The value of each compared field of one run (JSON-serialisable)."""
    doc = _json_doc(run.stdout) if any(s.startswith("stdout.json") for s in case.compare) else None
    values: dict[str, Any] = {}
    for spec in case.compare:
        if spec == "exit_code":
            values[spec] = "timeout" if run.timed_out else run.exit_code
        elif spec.startswith(POINTER_SPEC):
            values[spec] = pointer_get(doc, spec[len(POINTER_SPEC) :])
        elif spec.startswith(FILES_SPEC):
            glob = spec[len(FILES_SPEC) :]
            values[spec] = {k: v for k, v in run.files.items() if fnmatchcase(k, glob)}
        else:
            stream = run.stdout if spec.startswith("stdout") else run.stderr
            kind = spec.split(".", 1)[1]
            values[spec] = {
                "raw": text_value,
                "sha256": lambda b: hashlib.sha256(b).hexdigest(),
                "json": lambda _b: doc,
                "jsonl": _jsonl,
            }[kind](stream)
    return values


def run_many(
    command: Path, cases: Sequence[Case], fixtures: Path, repeat: int = 1
) -> list[list[Run]]:
    """Run every case `repeat` times across all cores; results keep the order of `cases`."""
    jobs = [(case, i) for case in cases for i in range(repeat)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = list(pool.map(lambda job: run_case(command, job[0], fixtures), jobs))
    return [runs[i * repeat : (i + 1) * repeat] for i in range(len(cases))]


def describe(run: Run) -> dict[str, Any]:
    return {
        "exit_code": run.exit_code,
        "timed_out": run.timed_out,
        "seconds": round(run.seconds, 4),
        "stderr_head": run.stderr[:400].decode("utf-8", "backslashreplace"),
    }
