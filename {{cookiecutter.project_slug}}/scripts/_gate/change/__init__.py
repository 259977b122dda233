"""What the patch changed in the package: the capabilities its functions reach (no code runs)."""
