"""Values and files, no process: a step's outcome and report (protocol, reports), the judgment
(context), judge.yaml (config), the step table (steps), protected-path rules (patterns),
pyproject.toml, the reviewed files (allowlist, quarantine, ledger, machine) and digests (seal).

It stands on the plugin alone (the shard rule and the call timeout, which the judge and the
plugin must agree on, are written once, there) and imports nothing else of the gate.
"""
