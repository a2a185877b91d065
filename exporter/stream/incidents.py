"""What a consumer asks of one event to count it: is this traceback an error of its own, was this
stats window busy. Which signals make a death, a stop or a failed start is exporter.stream.lifecycle's.

A traceback counts as ``traceback`` only when it is none of the named kinds (the OOM, CUDA, NCCL or
dead-engine error it raised is counted as that kind instead) and when it is not part of a stop, a
failed start or a death (``fields["during"]``, set by exporter.stream.lifecycle).
"""

from __future__ import annotations


def counts_as_traceback(traceback_fields: dict) -> bool:
    """A traceback that raised none of the named error kinds and belongs to no incident."""
    return not traceback_fields.get("kinds") and not traceback_fields.get("during")


def busy_window(fields: dict) -> bool:
    """A stats window in which the engine worked: requests running, or tokens in or out. vLLM logs
    one every interval while busy, so silence after such a window means something."""
    return bool(fields.get("running") or fields.get("generation_tokens_per_second")
                or fields.get("prompt_tokens_per_second"))
