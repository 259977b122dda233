"""The judge never reaches the network: it gives its verdict inside a namespace with none."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.bakery import branch, edit, judge


def unshare_works() -> bool:
    return shutil.which("unshare") is not None and (
        subprocess.run(["unshare", "-rn", "true"], capture_output=True, check=False).returncode == 0
    )


needs_unshare = pytest.mark.skipif(not unshare_works(), reason="unshare -rn is not permitted here")


@needs_unshare
def test_namespace_has_no_network() -> None:
    probe = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)"
    proc = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert proc.returncode != 0
    assert "unreachable" in proc.stderr.lower() or "OSError" in proc.stderr


@pytest.mark.e2e
@needs_unshare
def test_judge_without_network_still_judges(shop: Path) -> None:
    head = branch(
        shop,
        "offline-copy-change",
        lambda repo: edit(repo / "src/shop/orders.py", '"cart has no items"', '"cart is empty"'),
    )
    verdict = judge(shop, "--head", head, prefix=("unshare", "-rn"))
    assert verdict.returncode == 1, verdict.output
    assert verdict.statuses["replay"] == "block"
    assert all(status not in ("error", "needs-review") for status in verdict.statuses.values())
