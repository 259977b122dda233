"""Tests of the command line through ``main(argv)``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.cli import main

CART = (
    '{"items": [{"sku": "MUG", "qty": 2, "price_cents": 999}], '
    '"coupons": [{"kind": "fixed", "cents": 500}]}'
)
# 2 * 999 = 1998; 1998 - 500 = 1498
QUOTE = {"items": 1, "subtotal_cents": 1998, "discount_cents": 500, "total_cents": 1498}


def test_create_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(CART))
    assert main(["order", "create", "--cart", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {"order": QUOTE}
    assert err == ""


def test_create_reads_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cart = tmp_path / "cart.json"
    cart.write_text(CART, encoding="utf-8")
    assert main(["order", "create", "--cart", str(cart)]) == 0
    assert json.loads(capsys.readouterr().out) == {"order": QUOTE}


def test_rejected_cart_prints_json_error_and_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('{"items": []}'))
    assert main(["order", "create", "--cart", "-"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": {"code": "CART_EMPTY", "message": "cart has no items"}}
    assert err == "error: CART_EMPTY: cart has no items\n"


def test_put_reports_created_then_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["order", "put", "--id", "ord_1", "--json", "-"]
    results = []
    for _ in range(2):
        monkeypatch.setattr("sys.stdin", io.StringIO(CART))
        assert main(argv) == 0
        results.append(json.loads(capsys.readouterr().out))
    order = {**QUOTE, "id": "ord_1"}
    assert results == [
        {"order": order, "created": True},
        {"order": order, "created": False},
    ]
    assert json.loads((tmp_path / ".orders" / "ord_1.json").read_text(encoding="utf-8")) == order


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["order"],
        ["order", "frobnicate"],
        ["order", "create"],
        ["order", "put", "--id", "x"],
    ],
    ids=["nothing", "no-action", "unknown-action", "no-cart", "no-json"],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "error:" in err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["order", "--help"]) == 0
    assert "create" in capsys.readouterr().out


def test_unreadable_cart_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["order", "create", "--cart", str(tmp_path / "missing.json")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "cannot read cart" in err
