"""The assert inventory: its static scan (inventory, sites), assertion probes (probes) and the
run-time evidence that a test still tests (run_checks, run_evidence, changed_tests)."""
