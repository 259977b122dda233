"""Arguments a session passes through to pytest (`nox -s tests`, `nox -s oracle`): the
script's own --help first, at once and with the standard library only, everything else pytest's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def asks_help(argv: Sequence[str]) -> bool:
    """-h, --help or an abbreviation argparse takes for it (--hel), before any `--` (what
    follows one is a program's: `nox -s tests -- -- --help` is pytest's). The noxfile asks
    this too, so a session and its script agree on what asks."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "-h" or (len(arg) >= len("--hel") and "--help".startswith(arg)):
            return True
    return False


def add_pytest_args(parser: argparse.ArgumentParser, more: str = "") -> None:
    """The positional a pass-through script shows in its --help (it is never parsed)."""
    parser.add_argument(
        "pytest_args",
        nargs="*",
        metavar="PYTEST_ARG",
        help=f"pytest's own arguments, such as `-k NAME`, `-x` or `-v`{more}; after a `--`, "
        "pytest's own --help (`-- --help`)",
    )


def passed_through(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """pytest's arguments of `argv`, once the script's own --help is answered (argparse
    prints it and exits 0): all of them, a leading `--` dropped."""
    if asks_help(argv):
        parser.parse_args(["--help"])
    return list(argv[1:] if argv[:1] == ["--"] else argv)
