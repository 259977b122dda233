"""Command line: ``order create`` quotes a cart, ``order put`` stores it idempotently.

Results and errors are one JSON document on stdout (keys sorted, so output is
byte-stable); an error also gets one human line on stderr. Exit codes: 0 ok,
1 rejected cart or order, 2 usage error (as argparse does).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .orders import Cart, OrderError, load_cart, put_order, quote

STORE_DIR = ".orders"
EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """An argument that parsed but cannot be used, such as an unreadable file."""


def build_parser() -> argparse.ArgumentParser:
    # prog defaults to basename(sys.argv[0]): the console script's own name.
    parser = argparse.ArgumentParser(description="Quote and store orders.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    order = commands.add_parser("order", help="quote or store an order")
    actions = order.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="print the quote of a cart")
    create.add_argument("--cart", required=True, metavar="PATH", help="cart JSON file, - for stdin")
    create.set_defaults(run=_create)
    put = actions.add_parser("put", help=f"store an order under ./{STORE_DIR}/ (idempotent)")
    put.add_argument("--id", required=True, dest="order_id", metavar="ID", help="order id")
    put.add_argument(
        "--json",
        required=True,
        dest="cart",
        metavar="PATH",
        help="cart JSON file, - for stdin",
    )
    put.set_defaults(run=_put)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # Return rather than exit so callers (and tests) get a plain int.
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        document = args.run(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OrderError as exc:
        _emit({"error": {"code": exc.code, "message": exc.message}})
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return EXIT_REJECTED
    _emit(document)
    return EXIT_OK


def _create(args: argparse.Namespace) -> dict[str, object]:
    return {"order": quote(_read_cart(args.cart))}


def _put(args: argparse.Namespace) -> dict[str, object]:
    order, created = put_order(Path.cwd() / STORE_DIR, args.order_id, _read_cart(args.cart))
    return {"order": order, "created": created}


def _read_cart(source: str) -> Cart:
    if source == "-":
        try:
            return load_cart(sys.stdin.read())
        except UnicodeDecodeError:
            raise OrderError("BAD_JSON", "cart is not valid UTF-8") from None
    try:
        data = Path(source).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read cart {source}: {exc.strerror or exc}") from None
    return load_cart(data)


def _emit(document: dict[str, object]) -> None:
    print(json.dumps(document, sort_keys=True))


if __name__ == "__main__":
    raise SystemExit(main())
