"""Renamed: scripts/oracle.py. Works until the next schema_version."""

import sys

from oracle import main

if __name__ == "__main__":
    print("scripts/run_oracle.py is now scripts/oracle.py", file=sys.stderr)
    sys.exit(main())
