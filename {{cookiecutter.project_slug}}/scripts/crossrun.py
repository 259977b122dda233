"""Crossrun: the parent's own tests, taken from the base tree, judge the patch's build.

The step: _gate/steps/crossrun.py.

`python scripts/crossrun.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.crossrun import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
