"""Scenarios of tools/capture_vllm_run.py that exercise what clients do to a server: LoRA adapters
loaded, reloaded and failing to load at run time, tool calls the parser cannot read, request ids
with line breaks, streams the client drops, utility calls that fail, and a server whose access log
is off. Stdlib only (run by the exporter's interpreter; vLLM and torch live in the vLLM venv).

- lora_tools   --enable-lora with a tiny random adapter written here (static ``a1``), runtime load of
               ``a2`` (VLLM_ALLOW_RUNTIME_LORA_UPDATING), its in-place reload, a load of ``a3`` from a
               path that does not exist (vLLM answers 404 and serves on), a failed collective_rpc and
               a failed release_kv_cache_memory (VLLM_SERVER_DEV_MODE), hermes tool-call requests whose
               output the parser cannot read (bursts of identical ERROR records with tracebacks),
               request ids with line breaks, aborted streams, with --enable-log-requests and
               --enable-log-outputs; then SIGTERM
- quiet_log    --disable-uvicorn-access-log and no request logging: traffic, bad requests and aborted
               streams of which the log holds nothing; then SIGTERM

Each records what the client did and was answered in run.json's ``client_actions`` (copied into the
fixture's truth file), so a test compares the exporter's counts with it.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from tools import vllm_cpu, vllm_traffic

SCENARIOS = ("lora_tools", "quiet_log")
TOOL_TOKENS = ("<tool_call>", "</tool_call>")
# the model each scenario needs beyond the default: extra whole-word tokens
MODEL_TOKENS = {"lora_tools": TOOL_TOKENS}
LORA_RANK = 8

# A PEFT LoRA adapter for tools/vllm_cpu.py's tiny Llama (q_proj and v_proj of every layer, random
# weights), written inside the vLLM venv (torch and safetensors are there).
_WRITE_ADAPTER = r"""
import json, sys, torch
from safetensors.torch import save_file
out, hidden, layers, rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = torch.Generator().manual_seed(42)
t = {}
for i in range(layers):
    for m in ("q_proj", "v_proj"):
        k = f"base_model.model.model.layers.{i}.self_attn.{m}"
        t[k + ".lora_A.weight"] = (torch.randn(rank, hidden, generator=g) * 0.01).to(torch.bfloat16)
        t[k + ".lora_B.weight"] = (torch.randn(hidden, rank, generator=g) * 0.01).to(torch.bfloat16)
save_file(t, out + "/adapter_model.safetensors")
json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank,
           "lora_dropout": 0.0, "bias": "none", "target_modules": ["q_proj", "v_proj"],
           "base_model_name_or_path": None, "fan_in_fan_out": False, "inference_mode": True},
          open(out + "/adapter_config.json", "w"), indent=1)
"""


def write_adapter(directory: Path, venv: Path, hidden: int = 128, layers: int = 2) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(venv / "bin" / "python"), "-c", _WRITE_ADAPTER, str(directory), str(hidden), str(layers),
                    str(LORA_RANK)], check=True, timeout=300)
    return directory


def token_id(model: Path, word: str) -> int:
    """The id of a token added by make_model's ``extra_tokens``."""
    tok = json.loads((model / "tokenizer.json").read_text())
    for t in tok.get("added_tokens", []):
        if t["content"] == word:
            return t["id"]
    raise KeyError(word)


class Actions:
    """What the client did beyond the plain traffic, counted for the truth file."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, what: str, n: int = 1) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + n


def abort_stream(client: vllm_traffic.Client, body: dict, path: str = "/v1/chat/completions",
                 read_bytes: int = 200, timeout: float = 60.0) -> dict:
    """A streaming request the client drops after its first bytes (vLLM aborts it). Recorded like
    Client.call's requests (status 200, ``aborted``: the client closed it)."""
    u = urlparse(client.base)
    rec = {"method": "POST", "path": path, "kind": "aborted_stream", "stream": True, "started": round(time.time(), 3)}
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps({**body, "stream": True}).encode(),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        rec["status"] = r.status
        rec["bytes"] = len(r.read1(read_bytes) if hasattr(r, "read1") else r.read(read_bytes))
        rec["aborted"] = True
    except Exception as e:  # noqa: BLE001 - recorded: no status
        rec["status"], rec["error"] = None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()  # the server sees the disconnect and aborts the request
    rec["ended"] = round(time.time(), 3)
    with client._lock:
        client.records.append(rec)
        with open(client.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
    return rec


def _aborts(client: vllm_traffic.Client, actions: Actions, n: int) -> None:
    body = {"model": client.model, "max_tokens": 1024, "temperature": 0.0, "ignore_eos": True,
            "messages": [{"role": "user", "content": vllm_traffic.PROMPTS[0]}]}
    threads = [threading.Thread(target=lambda: actions.add("aborted_streams", abort_stream(client, body)["status"] == 200))
               for _ in range(n)]
    for t in threads:
        t.start()
        time.sleep(0.1)
    for t in threads:
        t.join(client.timeout + 5)


def _chat_body(client: vllm_traffic.Client, text: str, **extra) -> dict:
    return {"model": client.model, "max_tokens": 16, "temperature": 0.0,
            "messages": [{"role": "user", "content": text}], **extra}


def _lora_call(client: vllm_traffic.Client, actions: Actions, what: str, path: str, body: dict) -> int | None:
    status = client.call("POST", path, body, kind=what).get("status")
    actions.add(f"{what} {status}")
    return status


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def _tool_bursts(client: vllm_traffic.Client, actions: Actions, tool_id: int, rounds: int = 3, per_round: int = 8) -> None:
    """Chats with tools whose output is ``<tool_call>`` over and over (logit_bias): the hermes parser
    finds the tag, cannot read the JSON after it, and logs its ERROR with a traceback, many per second."""
    body = {"model": client.model, "max_tokens": 6, "temperature": 0.0, "tools": TOOLS, "tool_choice": "auto",
            "logit_bias": {str(tool_id): 100}, "messages": [{"role": "user", "content": "weather in paris?"}]}
    for _ in range(rounds):
        threads = [threading.Thread(target=lambda: actions.add(
            "tool_requests " + str(client.call("POST", "/v1/chat/completions", body, kind="tools").get("status"))))
            for _ in range(per_round)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(client.timeout + 5)
        time.sleep(1.2)


def _newline_ids(client: vllm_traffic.Client, actions: Actions) -> None:
    """Requests whose body's request_id holds line breaks (vLLM prints it with %s)."""
    for i in range(8):
        rid = f"nl-{i}\nsecond line of id {i}\nthird"
        stream = i % 2 == 1
        if i < 6:
            r = client.call("POST", "/v1/chat/completions",
                            _chat_body(client, vllm_traffic.PROMPTS[i % 4], request_id=rid, stream=stream,
                                       ignore_eos=True), stream=stream, kind="newline_id")
        else:
            r = client.call("POST", "/v1/completions", {"model": client.model, "prompt": vllm_traffic.PROMPTS[i % 4],
                                                        "max_tokens": 16, "temperature": 0.0, "ignore_eos": True,
                                                        "request_id": rid, "stream": stream},
                            stream=stream, kind="newline_id")
        actions.add(f"newline_id {'stream' if stream else 'plain'} {r.get('status')}")


def scenario_lora_tools(run, model: Path, home: Path) -> None:
    from tools import capture_vllm_run as cap

    adapter = write_adapter(home / "adapter", run.args.venv)
    tool_id = token_id(model, TOOL_TOKENS[0])
    actions = Actions()
    run.info["client_actions"] = actions.counts
    srv = run.server(model, home, [
        "--enable-lora", "--max-lora-rank", str(LORA_RANK), "--max-loras", "2", "--max-cpu-loras", "4",
        "--lora-modules", f"a1={adapter}", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
        "--enable-log-requests", "--enable-log-outputs",
    ], env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_SERVER_DEV_MODE": "1"})

    def traffic(client: vllm_traffic.Client) -> None:
        client.run_for(6, 2, seed=11, max_requests=60)
        for i in range(4):
            client.chat(vllm_traffic.PROMPTS[i], 16, False, model="a1")
        _lora_call(client, actions, "load a2", "/v1/load_lora_adapter", {"lora_name": "a2", "lora_path": str(adapter)})
        for i in range(4):
            client.chat(vllm_traffic.PROMPTS[i], 16, i % 2 == 1, model="a2")
        _lora_call(client, actions, "reload a2 in place", "/v1/load_lora_adapter",
                   {"lora_name": "a2", "lora_path": str(adapter), "load_inplace": True})
        _lora_call(client, actions, "load a3 missing path", "/v1/load_lora_adapter",
                   {"lora_name": "a3", "lora_path": str(home / "no-such-adapter")})
        run.event("LoRA loads done", counts=dict(actions.counts))
        client.run_for(6, 2, seed=12, max_requests=60)
        actions.add("collective_rpc " + str(client.call("POST", "/collective_rpc", {"method": "no_such_worker_method"},
                                                        kind="collective_rpc").get("status")))
        actions.add("release_kv_cache_memory " + str(client.call("POST", "/release_kv_cache_memory",
                                                                 kind="release_kv").get("status")))
        client.run_for(4, 2, seed=13, max_requests=40)
        _tool_bursts(client, actions, tool_id)
        _newline_ids(client, actions)
        _aborts(client, actions, 10)
        _lora_call(client, actions, "unload a2", "/v1/unload_lora_adapter", {"lora_name": "a2"})
        client.run_for(4, 2, seed=14, max_requests=40)
        run.event("traffic done", counts=dict(actions.counts))

    cap._serve_then_stop(run, srv, traffic)


def scenario_quiet_log(run, model: Path, home: Path) -> None:
    from tools import capture_vllm_run as cap

    actions = Actions()
    run.info["client_actions"] = actions.counts
    srv = run.server(model, home, ["--disable-uvicorn-access-log"])

    def traffic(client: vllm_traffic.Client) -> None:
        client.run_for(8, 2, seed=15, max_requests=100)
        client.bad_requests()
        _aborts(client, actions, 10)
        client.run_for(4, 2, seed=16, max_requests=40)
        run.event("traffic done", counts=dict(actions.counts))

    cap._serve_then_stop(run, srv, traffic)
