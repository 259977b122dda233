"""The gate's private package: everything the entry scripts of scripts/ share.

Entry scripts (one per step of the judge, named like the step, and the sessions' tools) import
this package only, never each other. Its modules, by job:

- steps: the judge's step table, the one place that says the order
- protocol: a step's outcome and report, exit codes; entry: `Contract`, a step's typed
  inputs and decision, and its script's entry (`run_main` for the tools that are not steps);
  reports: JSON reports and path names
- context: the judgment every step gets (refs, trees, the diff, judge.yaml, the builds)
- config: judge.yaml and the gate's YAML files; patterns: protected-path rules
- git: refs, diffs, worktrees, the oracle ref; envs: offline builds and tool environments;
  seal: the oracle environment's digest, checked before and after each trusted run
- provenance: each build's wheel against its tree; build_config: what decides the build
  (protected by the write-set); pyproject: pyproject.toml read as TOML; bytecode, manifest:
  a built environment's bytecode and its exact contents; markers, test_deps: the tests' own
  dependencies; reuse, kept_envs: what a judgment keeps for the next one
- process: process groups and capped capture; sandbox: `run_confined`, the one way to run
  the patch's code, through the launcher confine.py, and syscall_watch what a confined job
  reaches for; pytest_run: pytest runs read from the plugin; perturb, perturbed_tests: runs
  in a user's environment and under the shifted clock
- cases, cassettes: the CLI cases and their recordings; allowlist: reviewed contract changes
- inventory, sites, collect, probes, run_checks, run_evidence, changed_tests: the assert
  inventory, its assertion probes and its run-time evidence; oracle_run, crossrun_run,
  canaries, coupling, quarantine, ledger, machine: the oracle, the crossrun (its canaries, the
  tests coupled to moved internals) and flake control
- mutants, proposals, strength_cassettes, strength_plugin: oracle strength (mutmut)
- pytest_args: what a session passes through to pytest
- verdict, sarif: the verdict, the summary and the findings
- pytest_evidence, shard, subject, tamper, worker, worker_scene, and confine and patch_env
  which they start the worker with: pytest plugins (tamper: what changed in pytest's machinery
  during a run) and the subject worker, copied as a package of their own next to each pytest
  run (pytest_run.PLUGIN_FILES; they import nothing else of this package)

Nothing here runs on import, so the plugins' copy of this file is this file.
"""
