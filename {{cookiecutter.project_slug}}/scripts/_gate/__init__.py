"""The gate's private package: everything the entry scripts of scripts/ share.

Entry scripts (one per step of the judge, named like the step, and the sessions' tools) import
this package only, never each other. Its folders are floors: a module imports the standard
library, PyYAML, its own folder and the floors below it, never one above
(tests/test_layering.py holds it).

- plugin/: the files copied next to every trusted pytest run (the gate's pytest plugin, the
  subject worker, the launcher client they start it with, the shard rule they select by);
  standard library only, since they run in the project's environment
- core/: values and files, no process: a step's outcome and report, the judgment every step
  gets, judge.yaml, the step table (the one place that says the order), the allowlist,
  quarantine and ledger files, digests (seal), the checkout's lock of one judgment at a time
- runs/: what starts processes: git, builds and kept environments, the sandbox, pytest runs,
  the CLI cases and their recordings, perturbation, and a step script's entry (`Contract`)
- inventory/: the assert inventory, its assertion probes and its run-time evidence
- strength/: oracle strength (mutmut's mutants, the cases that tell them apart)
- verdict/: the verdict, the summary and the SARIF findings
- judge/: one run of the table (its lanes), the runner of its steps, the build step, what it
  checks of the base, its signals and its run's state; only scripts/judge.py imports it

Nothing here runs on import, so the plugins' copy of this file is this file.
"""
