"""The judge's steps, one module per step of the table (core/steps.py), named as the step: each
gives its `STEP`, a Contract of typed inputs (from the judgment or from a person's flags) and
one decide. The entry script of scripts/ named in the table runs it by hand or as the judge's
process; the judge decides it in its own process when the base's scripts are its own. A step
imports no other step: what one reads of another comes as an earlier outcome."""
