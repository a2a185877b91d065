#!/usr/bin/env python3
"""Read the default bucket boundaries of vLLM's latency histograms out of its sources.

    python tools/vllm_histogram_buckets.py vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl
    python tools/vllm_histogram_buckets.py /path/to/site-packages        # an installed vLLM (the `vllm` folder's parent)

Prints {histogram name: [upper bounds]} as JSON for every ``vllm:..._seconds`` histogram that
``vllm/v1/metrics/loggers.py`` creates. The bounds are read with ``ast`` (nothing of vLLM is
imported, so a CUDA-only wheel is read here as well as a CPU one): a list written in the call, a
list assigned to a name earlier in the same function (vLLM 0.29), or ``histogram_buckets("family")``
resolved through ``vllm/v1/metrics/buckets.py``'s defaults (0.30 and later). mixin/slo_buckets.py
holds what this printed for 0.29 to 0.34, and tests/test_slo.py compares it with the installed
vLLM CPU build when there is one. Standard library only.
"""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

LOGGERS = "vllm/v1/metrics/loggers.py"
BUCKETS = "vllm/v1/metrics/buckets.py"


def _read(source: Path, member: str) -> str | None:
    if source.is_file():
        with zipfile.ZipFile(source) as z:
            try:
                return z.read(member).decode()
            except KeyError:
                return None
    path = source / member
    return path.read_text() if path.is_file() else None


def _numbers(node: ast.AST) -> list[float] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in node.elts):
        return [float(e.value) for e in node.elts]
    return None


def _family_defaults(text: str | None) -> dict[str, list[float]]:
    """buckets.py: family key -> its default tuple (through _STATIC_FAMILY_DEFAULTS)."""
    if text is None:
        return {}
    tree = ast.parse(text)
    constants: dict[str, list[float]] = {}
    mapping: dict[str, str] = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not isinstance(target, ast.Name) or node.value is None:
            continue
        if (nums := _numbers(node.value)) is not None:
            constants[target.id] = nums
        elif isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Name):
                    mapping[k.value] = v.id
    return {family: constants[name] for family, name in mapping.items() if name in constants}


def _resolve(node: ast.AST, assigned: dict[str, ast.AST], families: dict[str, list[float]]) -> list[float] | None:
    if (nums := _numbers(node)) is not None:
        return nums
    if isinstance(node, ast.Name) and node.id in assigned:
        return _resolve(assigned[node.id], {}, families)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "histogram_buckets"
            and node.args and isinstance(node.args[0], ast.Constant)):
        return families.get(node.args[0].value)
    return None  # build_1_2_5_buckets(max_model_len): depends on the server's settings


def histogram_buckets(source: Path | str) -> dict[str, list[float]]:
    source = Path(source)
    loggers = _read(source, LOGGERS)
    if loggers is None:
        raise FileNotFoundError(f"{source}: no {LOGGERS}")
    families = _family_defaults(_read(source, BUCKETS))
    out: dict[str, list[float]] = {}
    for fn in ast.walk(ast.parse(loggers)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        assigned: dict[str, ast.AST] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                assigned[node.targets[0].id] = node.value
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            name = kw.get("name")
            if (not isinstance(name, ast.Constant) or not isinstance(name.value, str)
                    or not name.value.endswith("_seconds") or "buckets" not in kw):
                continue
            bounds = _resolve(kw["buckets"], assigned, families)
            if bounds is not None:
                out[name.value] = bounds
    return dict(sorted(out.items()))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(histogram_buckets(argv[0]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
