"""The judge: one run of the table (lanes), its steps' runner, the build step, and what it checks
of the base before judging. Only scripts/judge.py imports it."""
