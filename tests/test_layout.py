"""The house's rules, checked on the code itself: each package of exporter/ imports only the stages
before it (the pipeline's order: bytes -> frames -> events -> events in context -> metrics -> HTTP and
alerts; offline beside them), and no module grows past the size a reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPORTER = ROOT / "exporter"

# What each top-level entry of exporter/ may import (besides itself and exporter's __version__). A new
# dependency that runs back up the pipeline (a parser importing metrics, framing importing a source)
# fails here; one that is meant belongs in this table, with the docs (docs/architecture.md).
ALLOWED = {
    "config": set(),
    "framing": set(),
    "parsers": {"framing"},
    "sources": {"config", "framing"},
    "web": {"config"},
    "stream": {"framing", "parsers"},
    "metrics": {"framing", "parsers", "stream"},
    "alerts": {"framing", "parsers", "stream"},
    "offline": {"sources", "framing", "parsers", "stream", "metrics"},
    "daemon": {"config", "sources", "framing", "parsers", "stream", "metrics", "alerts", "web"},
    "commands": {"config", "sources", "framing", "parsers", "stream", "metrics", "offline", "daemon", "web"},
    "cli": {"commands", "framing", "sources"},
    "__main__": {"cli"},
}
MAX_LINES = 620  # "no module over ~600 lines"


def _imports(path: Path) -> set[str]:
    """The top-level entries of exporter/ that ``path`` imports (lazy imports inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "exporter":
            parts = node.module.split(".")
            if len(parts) > 1:
                out.add(parts[1])
            else:
                out.update(a.name for a in node.names if a.name != "__version__")
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("exporter."))
    return out


def _entry(path: Path) -> str:
    rel = path.relative_to(EXPORTER)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_no_import_runs_back_up():
    wrong = []
    for path in sorted(EXPORTER.rglob("*.py")):
        entry = _entry(path)
        if entry == "__init__":
            continue
        assert entry in ALLOWED, f"{path.relative_to(ROOT)}: a new top-level entry of exporter/: add it to ALLOWED"
        for dep in _imports(path) - {entry} - ALLOWED[entry]:
            wrong.append(f"{path.relative_to(ROOT)} imports exporter.{dep}")
    assert not wrong, "imports that run back up the pipeline:\n" + "\n".join(wrong)


def test_the_check_sees_a_wrong_import(tmp_path):
    # the rule above must be able to fail: a parser that imported metrics would be caught
    bad = tmp_path / "p.py"
    bad.write_text("from exporter.metrics import Metrics\ndef f():\n    from exporter import daemon\n")
    assert _imports(bad) == {"metrics", "daemon"}
    assert _imports(bad) - ALLOWED["parsers"] == {"metrics", "daemon"}


def test_each_package_says_what_enters_and_leaves():
    for init in sorted(EXPORTER.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{init.relative_to(ROOT)}: the package's docstring says what it holds"


def test_no_module_too_long():
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sorted([*EXPORTER.rglob("*.py"), *(ROOT / "mixin").rglob("*.py")])
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, "split these where a seam shows:\n" + "\n".join(long)


def test_top_of_exporter_holds_about_ten_entries():
    entries = [p.name for p in EXPORTER.iterdir() if p.name not in ("__init__.py", "__main__.py", "__pycache__")
               and not p.name.endswith(".egg-info")]
    assert len(entries) <= 14, sorted(entries)
