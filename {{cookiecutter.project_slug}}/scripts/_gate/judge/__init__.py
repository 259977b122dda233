"""The judge: one run of the table (lanes), its steps' runner, the build step, what it checks of
the base before judging, its signals (interrupt) and its run's state. Only scripts/judge.py
imports it."""
