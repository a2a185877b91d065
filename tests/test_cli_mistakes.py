"""What the command line says to a slip: a mistyped command, a bare path, an unknown or abbreviated
option, a time that is none, a file that is no vLLM log, charts without matplotlib. Each is one line
naming the mistake (the command's own usage above it, as argparse gives it), and exit 2 for a usage
error; nothing starts a daemon on a guess."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = str(ROOT / "exporter" / "data" / "sample.log")


def cli(*args: str) -> subprocess.CompletedProcess:
    """``vllm-log-exporter ARGS`` as a process, bounded in time: a mistake that started the daemon instead
    would hang here and fail. (The HTML report's message without matplotlib: tests/test_report.py.)"""
    return subprocess.run([sys.executable, "-m", "exporter", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def run(capsys, *args: str) -> subprocess.CompletedProcess:
    """The same in this process (for the commands that start no daemon either way): main's exit code,
    argparse's SystemExit included, and what it printed."""
    import gc

    from exporter.cli import main

    threshold = gc.get_threshold()
    try:
        code = main(list(args))
    except SystemExit as e:
        code = e.code
    finally:  # (main tunes the collector for a long pass: not for the rest of this test process)
        gc.unfreeze()
        gc.set_threshold(*threshold)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out, err)


def last_line(r: subprocess.CompletedProcess) -> str:
    return r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("typo,meant", [("reprot", "report"), ("compaer", "compare"), ("parse2", "parse")])
def test_a_mistyped_command_is_an_unknown_command_with_the_list(typo, meant, capsys):
    r = run(capsys, typo, SAMPLE)
    assert r.returncode == 2 and r.stdout == ""
    line = last_line(r)
    assert f"unknown command {typo!r} (did you mean {meant}?)" in line, line
    assert all(c in line for c in COMMANDS), line


@pytest.mark.parametrize("args", [["/var/log/vllm/vllm.log"], ["vllm.log"], ["serve", "vllm.log"],
                                  ["--demo", "vllm.log"]])
def test_a_bare_path_is_taken_for_a_forgotten_source(args):
    r = cli(*args)
    assert r.returncode == 2 and f"did you mean --source {args[-1]}?" in last_line(r), r.stderr


def test_serves_flags_get_serves_usage_and_an_abbreviation_is_no_flag():
    r = cli("--sourc", SAMPLE)  # argparse's prefix matching would have started a daemon on it
    assert r.returncode == 2
    assert r.stderr.startswith("usage: vllm-log-exporter serve ") and "--state-file FILE" in r.stderr
    assert last_line(r) == "vllm-log-exporter serve: error: unrecognized option: --sourc (did you mean --source?)"
    parsers = [build_parser(), *[a for a in build_parser()._actions if a.dest == "command"][0].choices.values()]
    assert all(p.allow_abbrev is False for p in parsers)


def test_a_mistyped_report_option_is_blamed_not_the_log(capsys):
    r = run(capsys, "report", "--formt", "json", SAMPLE)
    assert r.returncode == 2 and r.stdout == ""
    assert last_line(r) == "vllm-log-exporter report: error: unrecognized option: --formt (did you mean --format?)"


@pytest.mark.parametrize("args,says", [
    (["report", SAMPLE, "--since", "yesterday"], "vllm-log-exporter: --since: 'yesterday' is not a time"),
    (["report", SAMPLE, "--timezone", "Mars/Olympus"], "vllm-log-exporter: --timezone: unknown time zone"),
    (["report", SAMPLE, "--rules", str(ROOT / "pyproject.toml")], "vllm-log-exporter: "),
])
def test_every_usage_error_exits_2_in_one_line(args, says, capsys):
    r = run(capsys, *args)
    assert r.returncode == 2 and r.stderr.startswith(says) and r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("command", ["report", "parse", "backfill"])
def test_a_file_that_is_no_vllm_log_is_said_on_stderr(command, tmp_path, capsys):
    nginx = tmp_path / "access.log"
    nginx.write_text('10.0.0.1 - - [04/Aug/2026:02:45:01 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.5"\n' * 3
                     + "upstream timed out (110: Connection timed out)\n")
    extra = ["-o", str(tmp_path / "x.om")] if command == "backfill" else []
    r = run(capsys, command, str(nginx), *extra)
    assert f"0 of 4 lines were vLLM output" in r.stderr and str(nginx) in r.stderr, r.stderr
    assert r.returncode == (0 if command == "parse" else 1)
    if command == "report":
        assert r.stdout == ""  # no report of zeros
    ok = run(capsys, command, SAMPLE, *extra)
    assert ok.returncode == 0 and "vLLM output" not in ok.stderr


def test_serve_help_names_each_options_variable_and_the_variables_are_read():
    text = subprocess.run([sys.executable, "-m", "exporter", "serve", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60).stdout
    helps = {a.option_strings[0]: a.help or "" for a in [a for a in build_parser()._actions if a.dest == "command"][0]
             .choices["serve"]._actions if a.option_strings and a.option_strings[0] not in ("-h", "--version")}
    code = "".join((ROOT / "exporter" / "config" / f).read_text() for f in ("flags.py", "settings.py"))
    for option, help_text in helps.items():
        if option == "--demo-speed":  # (no variable of its own: VLLM_LOG_EXPORTER_DEMO turns the demo on)
            continue
        (var,) = re.findall(r"\$VLLM_LOG_EXPORTER_([A-Z_]+)", help_text) or [None]
        assert var and f'"{var}"' in code, f"{option}: {help_text}"
    assert "$VLLM_LOG_EXPORTER_SOURCE" in " ".join(text.split())
    # one kind of placeholder for one kind of value, as the docs' flag table writes them
    assert not re.search(r"--[\w.-]+ [A-Z]+_[A-Z_]+\b", text), "a metavar made from the destination's name"


def test_the_demos_help_says_its_first_pass():
    text = " ".join(subprocess.run([sys.executable, "-m", "exporter", "serve", "--help"], cwd=ROOT,
                                   capture_output=True, text=True, timeout=60).stdout.split())
    assert "the first pass in 30 s" in text


def test_the_capacity_section_names_the_device_the_log_names(capsys):
    cpu = ROOT / "tests" / "fixtures" / "vllm-0.32-cpu" / "traffic.log.gz"
    r = run(capsys, "report", str(cpu))
    assert r.returncode == 0 and "| CPU KV tokens |" in r.stdout and "GPU KV" not in r.stdout
    assert "| GPU KV tokens |" in run(capsys, "report", SAMPLE).stdout
