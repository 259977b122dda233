"""How a step that runs both builds runs them (the oracle, the crossrun): one value, built from
the judgment or from a person's flags, so the two steps spell it once."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from _gate.core.context import ChangedFile, ChangedFunctions, Judgment, Kept
from _gate.plugin.shard import Shard, add_shard_arg
from _gate.runs.perturb import add_perturb_args
from _gate.runs.reach import selecting
from _gate.runs.reuse import add_cache_args, add_same_build_arg
from _gate.runs.traced import Trace


@dataclass(frozen=True)
class RunSettings:
    """Its shard, whether the patch's build is the parent's (file for file: the patch's side
    is not run again), where a run on the parent's build alone is kept between judgments,
    the perturbed worlds to run and to require, the package lines the patch changed, which
    each run of the patch's build traces, and the base functions it changed, which select the
    tests a perturbed rerun runs (_gate/runs/reach.py; by hand: none, every test runs)."""

    shard: Shard
    same_build: bool
    kept: Kept
    perturb: tuple[str, ...]
    perturb_required: tuple[str, ...]
    changed: tuple[ChangedFile, ...] = ()
    functions: ChangedFunctions | None = None
    select: bool = True  # $ORACLE_SELECT

    def trace(self, label: str, *, tests: bool) -> Trace | None:
        """A run of the patch's build, traced as `label` (`tests`: a pytest run of tests, not
        the patch's code alone); None where nothing changed."""
        return Trace(self.changed, label, tests) if self.changed else None

    @classmethod
    def of(cls, j: Judgment) -> RunSettings:
        """A judge run: the shard, the builds, judge.yaml."""
        built, config = j.built, j.config
        perturb = (config.perturb, config.perturb_required)
        return cls(
            j.shard, built.same, built.kept, *perturb, built.changed, built.functions, selecting()
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunSettings:
        """A hand run: the flags `add_run_args` adds."""
        perturb, required = tuple(args.perturb), tuple(args.perturb_required)
        return cls(args.shard, args.same_build, Kept.from_args(args), perturb, required)


def add_run_args(p: argparse.ArgumentParser) -> None:
    """`--shard`, `--same-build`, the kept runs' `--cache` and digests, `--perturb`."""
    add_shard_arg(p)
    add_same_build_arg(p)
    add_cache_args(p)
    add_perturb_args(p)
