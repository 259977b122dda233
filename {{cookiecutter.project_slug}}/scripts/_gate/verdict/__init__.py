"""The verdict from the steps' outcomes, its summary, and the SARIF findings."""
