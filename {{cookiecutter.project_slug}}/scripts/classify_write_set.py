"""Renamed: scripts/write_set.py. Works until the next schema_version."""

import sys

from write_set import main

if __name__ == "__main__":
    print("scripts/classify_write_set.py is now scripts/write_set.py", file=sys.stderr)
    sys.exit(main())
