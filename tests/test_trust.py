"""The trust boundary (issue 32, item 2): text a client chooses, which vLLM echoes into its log,
never becomes an error, a death, a stall, a stats window, a supervisor event or an alert.

The eleven prompts are the issue's: each is a line of another family, sent as a prompt (or
generated as output) to a server logging requests (``--enable-log-requests``,
``--enable-log-outputs``); vLLM 0.32 echoes it in the request logger's lines
(``entrypoints/serve/utils/request_logger.py``), older releases in ``Received request ...: prompt:``.
"""

from __future__ import annotations

import pytest

from exporter.alerts.from_events import Alerts
from tests.conftest import run_lines

# The issue's eleven echoed prompts: what each would be, were it a line of vLLM's own.
ELEVEN = {
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
           "of 79.15 GiB of which 1.02 GiB is free.",
    "cuda_error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "nccl_error": "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    "engine_dead": "EngineCore encountered a fatal error.",
    "rpc_timeout": "TimeoutError: RPC call to execute_model timed out.",
    "worker_died": "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down executor.",
    "gpu_memory_fault": "Memory access fault by GPU node-2 (Agent handle: 0x55d1c0) on address 0x7f0c. "
                        "Reason: Page not present or supervisor privilege.",
    "engine_stats": "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, "
                    "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 99.0%, Prefix cache hit rate: 0.0%",
    "startup_failure": "ValueError: To serve at least one request with the models's max seq len (8192), (4.00 GiB "
                       "KV cache is needed, which is larger than the available KV cache memory (1.00 GiB).",
    "process_exit": "vllm.service: Main process exited, code=killed, status=9/KILL",
    # a record of vLLM's own inside the prompt: the glued-record split made it one
    "glued_engine_dead": "x ERROR 12-04 10:00:00 [core.py:1] EngineCore encountered a fatal error.",
}

HEADER = "(APIServer pid=1) INFO 12-04 10:00:00 [request_logger.py:71] "
OLD_HEADER = "INFO 06-01 10:00:00 [logger.py:39] "


def echoes(text: str) -> list[str]:
    """``text`` as vLLM's request logger prints it: 0.32's request and response lines, its DEBUG
    details line, and the prompt line of 0.5-0.10."""
    return [
        HEADER + f"Received request cmpl-{text[:5]}: params: SamplingParams(n=1, stop=[{text!r}]), lora_request: None.",
        HEADER + f"Generated response chatcmpl-1: output: {text!r}, finish_reason: stop",
        HEADER + f"Request chatcmpl-1 details: prompt: {text!r}, prompt_token_ids: [1, 2], prompt_embeds shape: None.",
        OLD_HEADER + f"Received request cmpl-1: prompt: {text!r}, params: SamplingParams(n=1), "
                     "prompt_token_ids: [1], lora_request: None, prompt_adapter_request: None.",
    ]


@pytest.mark.parametrize("name", sorted(ELEVEN))
def test_the_issues_eleven_echoed_prompts_give_nothing_and_page_nobody(name):
    text = ELEVEN[name]
    for line in echoes(text):
        _, events = run_lines([line], derived=True)
        assert [e.kind for e in events] == [], line
        alerts = Alerts(instance="127.0.0.1:10825")
        alerts.observe("gp", events, now=1e9)
        assert alerts.pending(now=1e9) == [], line
