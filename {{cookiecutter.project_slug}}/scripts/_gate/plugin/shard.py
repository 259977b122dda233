"""Shards: split a judgment's cases and tests across CI runners by a stable hash of their ids.

An id belongs to shard I of N when sha256(id) mod N is I-1. Every runner computes the same
split from the id alone: no list is shared between runners, both builds see the same split,
and adding a case moves no other. `1/1`, the default, is the whole judgment.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

SHARD = re.compile(r"([1-9][0-9]*)/([1-9][0-9]*)")


@dataclass(frozen=True)
class Shard:
    index: int = 1
    count: int = 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def whole(self) -> bool:
        return self.count == 1

    def owns(self, ident: str) -> bool:
        if self.whole:
            return True
        digest = hashlib.sha256(ident.encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def pytest_options(self) -> list[str]:
        """What the gate's pytest plugin needs to deselect the tests other shards own."""
        return [] if self.whole else [f"--oracle-shard={self}"]

    def pick(self, items: Iterable[T], ident: Callable[[T], str]) -> list[T]:
        return [item for item in items if self.owns(ident(item))]

    def evidence(self, owned: int, total: int) -> dict[str, Any]:
        """What a sharded step reports, so a merge can check that the shards add up."""
        return {"index": self.index, "count": self.count, "owned": owned, "total": total}

    @classmethod
    def of(cls, evidence: Any) -> Shard:
        """The shard `evidence` (what `evidence()` wrote) names; the whole run for none.
        ValueError for one that names no shard."""
        if evidence is None:
            return WHOLE
        try:
            return cls(int(evidence["index"]), int(evidence["count"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{evidence!r} names no shard") from None


WHOLE = Shard()


def parse_shard(text: str) -> Shard:
    found = SHARD.fullmatch(text.strip())
    if not found or int(found.group(1)) > int(found.group(2)):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 1 <= I <= N (e.g. 2/4)")
    return Shard(int(found.group(1)), int(found.group(2)))


def add_shard_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shard",
        type=parse_shard,
        default=WHOLE,
        metavar="I/N",
        help="judge only the ids of shard I of N (default 1/1: all of them)",
    )
