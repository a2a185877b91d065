"""vllm-log-exporter: Prometheus metrics from a vLLM server's log."""

__version__ = "0.2.0"
