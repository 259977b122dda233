"""What starts processes: git; builds, their provenance and bytecode, and the environments a
judgment keeps (envs, provenance, build_config, bytecode, manifest, kept_envs, reuse); the one
way to run the patch's code (sandbox, process, syscall_watch); pytest runs (pytest_run,
collect, pytest_args, markers, test_deps), the oracle's and the crossrun's (oracle_run,
crossrun_run, canaries, coupling); the CLI cases and their recordings (cases, cassettes);
perturbation (perturb, perturbed_tests); and a step script's entry (entry).
"""
