"""Log sources: each yields batches of raw lines from one vLLM server's log, and reconnects itself.

In: a file (rotation, copytruncate), a glob of Kubernetes pod logs, the journal, a container's API
stream, stdin or the packaged demo. Out: batches of lines (exporter.framing.lines cuts them), and
checkpoints that the state file (exporter.sources.state) keeps so a restart resumes where it stopped.
"""
