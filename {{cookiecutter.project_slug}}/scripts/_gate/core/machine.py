"""Where a variance run ran: the identity the ledger counts machines by.

A machine is a CI runner (its provider, the runner's name or id and, on hosted images, the
image) or, outside CI, the host (systemd's machine id, else the host name and MAC address),
together with the OS and the architecture. Two jobs on two runner images are two machines; two
clones on one laptop are one. The host id is hashed before it is written: the ledger is
shared, /etc/machine-id is not meant to be.

The identity is self-reported, as any process's environment is. It keeps honest runs from
freezing a laptop's noise; what keeps a dishonest one off the ledger is that only the CI job
that merges the runs may push the oracle ref.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# (provider, the variable that says the run is on it, the variables naming its runner). The
# generic `CI` comes last: most providers set it too, but only the specific one names a runner.
CI_PROVIDERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("github-actions", "GITHUB_ACTIONS", ("RUNNER_NAME", "ImageOS", "ImageVersion")),
    ("gitlab-ci", "GITLAB_CI", ("CI_RUNNER_ID", "CI_RUNNER_DESCRIPTION")),
    ("buildkite", "BUILDKITE", ("BUILDKITE_AGENT_ID", "BUILDKITE_AGENT_NAME")),
    ("azure-pipelines", "TF_BUILD", ("AGENT_ID", "AGENT_NAME")),
    ("jenkins", "JENKINS_URL", ("NODE_NAME",)),
    ("ci", "CI", ()),
)
# Every variable the identity reads: what a test clears to stand on a machine of its own.
VARIABLES = tuple(dict.fromkeys(v for _, flag, names in CI_PROVIDERS for v in (flag, *names)))
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


def digest(text: str) -> str:
    return hashlib.sha256(b"oracle-template machine\0" + text.encode()).hexdigest()[:16]


def host_id() -> str:
    for name in MACHINE_ID_FILES:
        try:
            raw = Path(name).read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if raw:
            return digest(raw)
    # Containers often have no machine id: their host name and MAC tell them apart.
    return digest(f"{socket.gethostname()}/{uuid.getnode():012x}")


def identity(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This machine, as a variance run file records it: `id` is what the ledger counts."""
    env = os.environ if env is None else env
    provider, names = next(
        ((name, names) for name, flag, names in CI_PROVIDERS if truthy(env.get(flag))),
        ("local", ()),
    )
    runner = {name: env[name] for name in names if env.get(name)}
    facts: dict[str, Any] = {
        "ci": provider != "local",
        "provider": provider,
        "runner": runner,
        "host": host_id(),
        "os": platform.platform(),
        "arch": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    key = [provider, runner, facts["host"], platform.system(), facts["arch"]]
    return {"id": digest(json.dumps(key, sort_keys=True)), **facts}
