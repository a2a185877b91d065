"""Why a server did not start: the KV cache too small for one max-length request, no memory left
for the cache blocks, an unknown architecture or argument, a model that cannot be found, a port
taken, the engine core failing to initialise.

vLLM raises these as exceptions at start-up, so they usually end a traceback (whose exception line
the traceback joiner runs through the error parsers) or stand alone in the EngineCore's ERROR lines.
Wordings, from vLLM's source:

- V1 (``v1/core/kv_cache_utils.py``): "To serve at least one request with the models's max seq len
  (N), (X GiB KV cache is needed, which is larger than the available KV cache memory (Y GiB). Based
  on the available memory, the estimated maximum model length is M. Try increasing
  `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
- V0: "The model's max seq len (N) is larger than the maximum number of tokens that can be stored in
  KV cache (M). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` ..."
- both: "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` ..."
- "Model architectures ['X'] are not supported for now" / argparse's "error: unrecognized
  arguments" and "error: argument --x: invalid choice": ``bad_argument``
- an out-of-range value (``--gpu-memory-utilization 1.7``): 0.29-0.32 validate their config
  dataclasses with pydantic, whose exception line is "1 validation error for CacheConfig" (the field
  and the rule follow on lines of their own): ``bad_argument``
- a model that cannot be found (``model_not_found``): a local path that is not there reaches
  huggingface_hub as a repo id, "Repo id must be in the form 'repo_name' or
  'namespace/repo_name': '/models/x'" (HFValidationError, vLLM 0.29-0.32 on a real run here);
  transformers' "... is not a local folder and is not a valid model identifier", "does not appear
  to have a file named config.json"; vLLM's "Invalid repository ID or local directory specified";
  huggingface_hub's RepositoryNotFoundError ("Repository Not Found for url") and, offline,
  LocalEntryNotFoundError
- a gated or private model the server may not fetch (``model_access``): huggingface_hub's GatedRepoError ("401
  Client Error. ... Cannot access gated repo for url ..."), requests' "401 Client Error: Unauthorized for url:
  https://huggingface.co/..." (hyperonym/basaran#289), transformers' "You are trying to access a gated repo."
- a port already taken (``address_in_use``): ``OSError: [Errno 98] Address already in use`` from
  the API server's bind (0.29-0.32, before the engine starts), uvicorn's "error while attempting to
  bind on address (...): address already in use", torch's TCPStore between ranks "The server socket has failed
  to listen on any local network address. ... (errno: 98 - Address already in use)"
- "Engine core initialization failed. See root cause above." / "EngineCore failed to start" /
  "WorkerProc failed to start" / "WorkerProc initialization failed due to an exception in a background process"
  (ai-dynamo/dynamo#1408) / no device at all ("No CUDA GPUs are available", ROCm's "No HIP GPUs are available",
  vllm-project/vllm#34573): ``other`` (the root cause, when it is one of the above, comes first and is counted by its reason)
"""

from __future__ import annotations

from exporter.parsers.events import STARTUP_FAILURE_REASONS as REASONS, Event
from exporter.framing.frame import Frame
from exporter.parsers._values import to_bytes
from exporter.parsers.base import EXCEPTION_P, PROBLEM_LEVELS, UNREAD_HEADER_P, Parser, lazy_compile, where

__all__ = ["PARSER", "REASONS"]

_SZ = r"([\d.]+) ?(B|KiB|MiB|GiB|TiB|KB|MB|GB)"
_V1_TOO_SMALL = lazy_compile(
    rf"max seq len \((\d+)\), \({_SZ} KV cache is needed, which is larger than the available KV cache memory "
    rf"\({_SZ}\)\.(?: Based on the available memory, the estimated maximum model length is (\d+)\.)?")
_V0_TOO_SMALL = lazy_compile(r"max seq len \((\d+)\) is larger than the maximum number of tokens that can be stored in "
                           r"KV cache \((\d+)\)")
_ARCH = lazy_compile(r"Model architectures? \[?([^\]]*?)\]? (?:are|is) not supported")
_ARGPARSE = lazy_compile(r"error: (unrecognized arguments: .*|argument [^:]+: .*)$")
# a config dataclass or the engine's arguments, not a request model (those are a client's 400)
_VALIDATION = lazy_compile(r"\d+ validation errors? for (\w*(?:Config|Args))\b")
_MODEL_NOT_FOUND = ("Repo id must be in the form", "is not a local folder and is not a valid model identifier",
                    "does not appear to have a file named config.json", "Invalid repository ID or local directory",
                    "RepositoryNotFoundError", "Repository Not Found for url", "LocalEntryNotFoundError")
# the bind's exception (Linux 98, macOS 48, Windows 10048) and uvicorn's own error; not parallel.py's
# "Address already in use. Retrying with a new port." (a WARNING: vLLM picks another port itself)
_ADDRESS_IN_USE = lazy_compile(r"\[Errno (?:98|48|10048)\] Address already in use|error while attempting to bind on "
                             r"address .*: address already in use|The server socket has failed to listen on any local "
                             r"network address")
_MODEL_ACCESS = lazy_compile(r"GatedRepoError|Cannot access gated repo|You are trying to access a gated repo|"
                           r"40[13] Client Error: (?:Unauthorized|Forbidden) for url: \S*(?:huggingface|/resolve/)")
_OTHER = ("Engine core initialization failed", "EngineCore failed to start", "WorkerProc failed to start",
          "WorkerProc initialization failed", "No CUDA GPUs are available", "No HIP GPUs are available")


def _parse(frame: Frame) -> list[Event] | None:
    msg = frame.message
    fields: dict
    m = _V1_TOO_SMALL.search(msg)
    if m:
        fields = {"reason": "kv_cache_too_small", "max_model_len": int(m.group(1)),
                  "needed_bytes": to_bytes(float(m.group(2)), m.group(3)),
                  "available_bytes": to_bytes(float(m.group(4)), m.group(5))}
        if m.group(6):
            fields["estimated_max_model_len"] = int(m.group(6))
    elif (m := _V0_TOO_SMALL.search(msg)):
        fields = {"reason": "kv_cache_too_small", "max_model_len": int(m.group(1)), "kv_cache_tokens": int(m.group(2))}
    elif "No available memory for the cache blocks" in msg:
        fields = {"reason": "no_kv_memory"}
    elif (m := _ARCH.search(msg)):
        fields = {"reason": "bad_argument", "architecture": m.group(1).strip("'\" ")[:200]}
    elif (m := _ARGPARSE.search(msg)):
        fields = {"reason": "bad_argument", "argument": m.group(1)[:300]}
    elif (m := _VALIDATION.search(msg)):
        fields = {"reason": "bad_argument", "config": m.group(1)[:100]}
    elif _MODEL_ACCESS.search(msg):
        fields = {"reason": "model_access"}
    elif any(w in msg for w in _MODEL_NOT_FOUND):
        fields = {"reason": "model_not_found"}
    elif _ADDRESS_IN_USE.search(msg):
        fields = {"reason": "address_in_use"}
    elif any(w in msg for w in _OTHER):
        fields = {"reason": "other"}
    else:
        return None
    fields["message"] = msg[:500]
    return [Event("startup_failure", fields)]


PARSER = Parser(
    "startup_failure",
    ("max seq len", "No available memory for the cache blocks", "not supported", "error: unrecognized arguments",
     "error: argument", "Engine core initialization failed", "EngineCore failed to start", "WorkerProc failed to start",
     "WorkerProc initialization failed", " GPUs are available", "validation error", *_MODEL_NOT_FOUND,
     "Address already in use", "address already in use", "The server socket has failed to listen", "gated repo",
     " Client Error"),
    _parse,
    # an exception's line (its type first), an ERROR record of the engine core, argparse's usage error
    where(PROBLEM_LEVELS, start=UNREAD_HEADER_P + EXCEPTION_P + r"(?:To serve at least one request with the models?'s max "
                                r"seq len|The model's max seq len \(|No available memory for the cache blocks|"
                                r"Model architectures? |Engine core initialization failed|EngineCore failed to start|"
                                r"WorkerProc failed to start|WorkerProc initialization failed|No (?:CUDA|HIP) GPUs are "
                                r"available|\S+(?: \S+)?: error: (?:unrecognized arguments|argument )|"
                                # pydantic's config validation; a model that cannot be found (the path or
                                # id, without spaces, before transformers' words; huggingface_hub's
                                # exception types); the bind's error and uvicorn's
                                r"\d+ validation errors? for \w*(?:Config|Args)\b|Repo id must be in the form|"
                                r"\S+ (?:is not a local folder and is not a valid model identifier|does not appear "
                                r"to have a file named config\.json)|Invalid repository ID or local directory|"
                                r"Repository Not Found for url|\[Errno (?:98|48|10048)\] Address already in use|"
                                r"(?:\[Errno \d+\] )?error while attempting to bind on address |The server socket has "
                                r"failed to listen on any local network address|Cannot access gated repo|You are trying to "
                                r"access a gated repo|40[13] Client Error)"
                                r"|" + UNREAD_HEADER_P + r"[\w.]*(?:RepositoryNotFoundError|LocalEntryNotFoundError|"
                                r"GatedRepoError)\b"),
)
