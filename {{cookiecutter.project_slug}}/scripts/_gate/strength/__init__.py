"""Oracle strength: mutmut's mutants, the cassette tests it runs them against, and the cases
that would tell the missed ones apart."""
