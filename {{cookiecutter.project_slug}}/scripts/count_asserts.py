"""Assert inventory: compare every test of the parent tree with the patch tree, by AST.

The step: _gate/steps/assert_inventory.py.

`python scripts/count_asserts.py --help` says how to run it by hand and its exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _gate.steps.assert_inventory import STEP


def main(argv: Sequence[str] | None = None) -> int:
    return STEP.main(argv)


if __name__ == "__main__":
    sys.exit(main())
