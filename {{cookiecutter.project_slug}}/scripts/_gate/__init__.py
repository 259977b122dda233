"""The gate's private package: everything the entry scripts of scripts/ share.

Entry scripts (one per step of the judge, named like the step, and the sessions' tools) import
this package only, never each other. Its modules, by job:

- steps: the judge's step table, the one place that says the order
- protocol: a step's outcome and report, exit codes; entry: `run_main`, a step script's
  entry; reports: JSON reports and path names
- context: the judgment every step gets (refs, trees, the diff, judge.yaml, the builds)
- config: judge.yaml and the gate's YAML files; patterns: protected-path rules
- git: refs, diffs, worktrees, the oracle ref; envs: offline builds and tool environments;
  seal: the oracle environment's digest, checked before and after each trusted run
- provenance: each build's wheel against its tree; build_config: what decides the build
  (protected by the write-set); pyproject: pyproject.toml read as TOML
- process: process groups and capped capture; sandbox: `run_confined`, the one way to run
  the patch's code, through the launcher confine.py; pytest_run: pytest runs read from the
  plugin
- cases, cassettes: the CLI cases and their recordings; allowlist: reviewed contract changes
- inventory, sites, collect: the assert inventory; oracle_run, crossrun_run, canaries,
  quarantine, ledger: the oracle, the crossrun (and its canaries) and flake control
- verdict, sarif: the verdict, the summary and the findings
- pytest_evidence, shard, subject, tamper, worker: pytest plugins (tamper: what changed in
  pytest's machinery during a run) and the subject worker, copied as a package of their own
  next to each pytest run (they import nothing else of this package)

Nothing here runs on import, so the plugins' copy of this file is this file.
"""
