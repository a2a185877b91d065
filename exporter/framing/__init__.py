"""Bytes to frames: lines cut from bytes (bounded), Kubernetes CRI parts joined, JSON records
unpacked, and each physical line's wrappers, colour, process tag and vLLM header peeled off
into a :class:`~exporter.framing.frame.Frame`.

In: bytes or text from a source. Out: frames. Pure: no I/O, no Prometheus.
"""
