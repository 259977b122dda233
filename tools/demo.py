"""The main job: bake the example, judge a clean refactor and an agent-style patch.

    python -m tools.demo [--keep DIR]

Both branches are judged for real (`nox -s judge -- --head BRANCH`) from a checkout of the
base branch, and both verdicts are printed with the steps that decided them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tools.bakery import Verdict, bake, branch, edit, judge

REFACTOR_OLD = """    cut = remaining * coupon.value // BPS_FULL
    if coupon.cap_cents is not None:
        cut = min(cut, coupon.cap_cents)
    return cut
"""
REFACTOR_NEW = """    cut = remaining * coupon.value // BPS_FULL
    return cut if coupon.cap_cents is None else min(cut, coupon.cap_cents)
"""


def clean_refactor(repo: Path) -> None:
    """Same behaviour, different code: the gate must let it through."""
    edit(repo / "src/shop/discounts.py", REFACTOR_OLD, REFACTOR_NEW)


def agent_patch(repo: Path) -> None:
    """What a test-editing agent does: change an output, then weaken the test that saw it."""
    edit(repo / "src/shop/orders.py", '"cart has no items"', '"the cart is empty"')
    edit(repo / "tests/test_cli.py", '"cart has no items"', '"the cart is empty"')
    edit(
        repo / "tests/test_cli.py",
        '    assert err == "error: CART_EMPTY: cart has no items\\n"\n',
        "",
    )


def show(title: str, verdict: Verdict) -> None:
    report = verdict.report
    print(f"\n=== {title}: {report.get('verdict', 'no report')} (exit {report.get('exit_code')})")
    for step in report.get("steps", []):
        mark = {"pass": " ", "advisory": "~"}.get(step["status"], "!")
        print(f" {mark} {step['name']:<17} {step['status']:<12} {step['summary']}")
    review = report.get("review")  # what a code owner looks at (beside a block too)
    for row in review["protected"] if review else []:
        print(f"   review {row['path']} (rule {row['rule']})")
    if review and report.get("verdict") == "needs-review":  # a rerun would not lift a block
        print(f"   then: {review['rerun']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="bake here and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="oracle-demo-") as tmp:
        repo = bake(args.keep or Path(tmp))
        print(f"baked {repo}")
        refactor = judge(repo, "--head", branch(repo, "refactor/cut-helper", clean_refactor))
        agent = judge(repo, "--head", branch(repo, "agent/empty-cart-copy", agent_patch))
        show("clean refactor", refactor)
        show("agent patch", agent)
    ok = refactor.report.get("verdict") == "merge" and agent.report.get("verdict") == "block"
    print("\ndemo:", "both verdicts as expected" if ok else "UNEXPECTED verdicts, see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
