"""The files copied next to every trusted pytest run (runs/pytest_run.PLUGIN_FILES): the gate's
pytest plugin (pytest_evidence, tamper), the subject worker (subject, worker, worker_scene),
the launcher's client they start it with (confine, patch_env) and the shard rule (shard).

They run in the project's environment, which has only the standard library for certain, so
they import nothing else, of this package or outside it.
"""
