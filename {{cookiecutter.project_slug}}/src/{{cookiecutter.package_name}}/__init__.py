"""Example order CLI: cart quotes, stacked coupons and an idempotent order store.

Money is always an integer number of cents; no floats anywhere.
"""

from __future__ import annotations

__version__ = "0.1.0"
