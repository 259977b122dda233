"""Classify every path the patch wrote, over all commits of the branch, against the base.

The step: _gate/steps/write_set.py.

`python scripts/write_set.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.write_set import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
