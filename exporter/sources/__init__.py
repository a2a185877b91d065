"""Log sources: each yields batches of raw lines from one vLLM server's log, and reconnects itself."""
