"""Values and files, no process: a step's outcome and report (protocol, reports), the judgment
(context), judge.yaml (config), the step table (steps), protected-path rules (patterns),
pyproject.toml, the reviewed files (allowlist, quarantine, ledger, machine) and digests (seal).

The ground floor of the gate: it imports nothing else of it but the plugin's shard rule.
"""
