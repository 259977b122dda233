"""The subject worker: runs inside the build under test and answers the oracle's calls.

    python -I worker.py BASE/oracle/adapter.py [SPEC]  # started by subject.py, one per run

With SPEC (change coverage, change_trace.py), the tracer starts before the adapter loads, and
each call runs as the evidence its request names (the property that made it).

Reads one JSON request a line on stdin ({"fn", "args", "kwargs"}), calls that function of the
adapter, and writes one JSON line back: {"ok": value} or {"raised": {"type", "message"}}.
Nothing here is trusted: the oracle's assertions run in the pytest process, not here.
Stdlib only, so that it starts fast and imports nothing the build did not ask for.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CALL_TIMEOUT = 60.0  # seconds one call into the build may take; judge.yaml `call_timeout`


def load_adapter(path: Path, name: str = "oracle_adapter") -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported(module: Any, name: str) -> Callable[..., Any]:
    names = getattr(module, "__all__", None)
    allowed = name in names if names is not None else not name.startswith("_")
    function = getattr(module, name, None) if allowed else None
    if not callable(function):
        raise AttributeError(f"oracle/adapter.py exports no function {name!r}")
    return function  # type: ignore[no-any-return]


def answer(module: Any, line: bytes, tracer: Any = None) -> str:
    """One reply line; a value that cannot cross the boundary as JSON is the adapter's error."""
    try:
        request = json.loads(line)
        if tracer is not None:
            tracer.name(str(request.get("evidence", "")))
        value = exported(module, request["fn"])(*request["args"], **request["kwargs"])
        return json.dumps({"ok": value})
    except Exception as exc:
        return json.dumps({"raised": {"type": type(exc).__name__, "message": str(exc)}})


def traced(spec: str) -> Any:
    """The tracer SPEC describes, started: change_trace.py beside SPEC (the worker runs
    isolated, with no folder of the gate's on sys.path, and confined, it may see no other
    file of the folder this one is in)."""
    tracing = load_adapter(Path(spec).with_name("change_trace.py"), "change_trace")
    tracer = tracing.load(spec)
    atexit.register(tracer.finish)
    tracer.start()
    return tracer


def serve(adapter: Path, spec: str | None = None) -> int:
    # Started as a user starts Python (a perturbed run), the script's folder, the gate's
    # plugins, leads sys.path: out of it, so that no module of theirs shadows the build's.
    here = os.path.dirname(os.path.realpath(__file__))
    if not sys.flags.isolated and sys.path and os.path.realpath(sys.path[0]) == here:
        del sys.path[0]
    # Replies go to a private copy of stdout; the subject's own prints land on stderr.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    tracer = traced(spec) if spec else None
    module = load_adapter(adapter)
    for line in sys.stdin.buffer:
        replies.write(answer(module, line, tracer) + "\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), *sys.argv[2:3]))
