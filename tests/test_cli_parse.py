import json
import subprocess
import sys

from exporter.parsers.events import KINDS
from tests.conftest import ROOT, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0


def cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "exporter", *args], cwd=ROOT, input=input,
                          capture_output=True, text=True, timeout=120)


def test_parse_prints_every_kind_across_the_samples(tmp_path):
    """The packaged samples, the warning signs no sample run has (a ROCm fault, a Ray actor...), issue 36's
    lines (failures, the request log, engine steps: tests/fixtures/real_lines/issue36.yaml); a user's rules
    (the example's) give the rest."""
    import yaml

    seen = set()
    issue36 = tmp_path / "issue36.log"
    entries = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue36.yaml").read_text(encoding="utf-8"))
    # and the two records that begin with a request's id (tests/fixtures/real_lines/request_refusals.yaml)
    entries += yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "request_refusals.yaml").read_text(
        encoding="utf-8"))
    issue36.write_text("".join(e["line"] + "\n" for e in entries), encoding="utf-8")
    for path in (SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE, ROOT / "tests" / "fixtures" / "warning_signs.log", issue36):
        rules = ["--rules", str(ROOT / "examples" / "custom-build.rules.yaml")] if path == SAMPLE else []
        out = cli("parse", str(path), "--year", "2026", *rules)
        assert out.returncode == 0, out.stderr
        for line in out.stdout.splitlines():
            ev = json.loads(line)
            assert set(ev) == {"kind", "ts", "process", "pid", "line", "fields"}
            seen.add(ev["kind"])
    assert seen == set(KINDS)


def test_parse_stats_on_the_sample_has_nothing_unparsed():
    out = cli("parse", "--stats", str(SAMPLE))
    assert out.returncode == 0, out.stderr
    lines = SAMPLE.read_text(encoding="utf-8").count("\n")
    assert f"lines read: {lines}\n" in out.stdout
    assert "  unparsed: 0\n" in out.stdout
    assert "most common unparsed" not in out.stdout


def test_parse_stats_shows_unparsed_shapes_from_stdin():
    text = "weird line 1\nweird line 22\nother 3\nINFO 01-01 00:00:00 [a.py:1] hi\n"
    out = cli("parse", "--stats", "-", input=text)
    assert out.returncode == 0
    assert "  unparsed: 3\n" in out.stdout and "  ignored: 1\n" in out.stdout
    assert "        2  weird line N" in out.stdout


def test_parse_gzip_and_missing_file(tmp_path):
    import gzip

    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(b'INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 200 OK\n'))
    out = cli("parse", str(gz))
    assert json.loads(out.stdout)["fields"]["path"] == "/health"
    out = cli("parse", str(tmp_path / "nope.log"))
    assert out.returncode == 2 and "nope.log: cannot open" in out.stderr and out.stderr.count("\n") == 1


def test_an_output_that_cannot_be_written_is_one_line_naming_it(tmp_path):
    sample = str(SAMPLE)
    r = cli("backfill", sample, "-o", str(tmp_path / "missing" / "x.om"))
    assert r.returncode == 2 and r.stderr == f"vllm-log-exporter: -o {tmp_path}/missing/x.om: cannot write: No such file or directory\n"
    r = cli("report", sample, "--html", str(tmp_path / "missing" / "r.html"))
    assert r.returncode == 1 and r.stderr == f"vllm-log-exporter: {tmp_path}/missing/r.html: No such file or directory\n"


def test_help_version_and_report_outputs():
    top = cli("--help")
    assert top.returncode == 0 and "Without a command, serve is meant" in top.stdout
    for command in ("serve", "parse", "report", "backfill", "healthcheck"):
        r = cli(command, "--version")
        assert r.returncode == 0 and r.stdout.startswith("vllm-log-exporter "), (command, r.stderr)
    serve_help, report_help = cli("serve", "--help").stdout, cli("report", "--help").stdout
    year_help = "year of journald/vLLM timestamps, which print none"
    assert year_help in " ".join(serve_help.split()) and year_help in " ".join(report_help.split())
    assert "what to print: markdown (default) or json" in " ".join(report_help.split())


def test_report_with_html_prints_no_markdown_unless_asked_and_stdin_is_named_stdin(tmp_path):
    page = tmp_path / "r.html"
    r = cli("report", str(SAMPLE), "--html", str(page))
    assert r.returncode == 0 and r.stdout == "" and page.exists()
    assert r.stderr == f"{page}: HTML report written\n"
    r = cli("report", str(SAMPLE), "--html", str(page), "--format", "markdown")
    assert r.stdout.startswith("# vLLM run report: ")
    r = cli("report", "-", input=SAMPLE.read_text())
    assert r.stdout.startswith("# vLLM run report: stdin\n")


def test_parse_explain_gives_every_line_what_it_became():
    r = cli("parse", str(SAMPLE), "--explain", "--year", "2026")
    assert r.returncode == 0, r.stderr
    rows = [ln.split("\t") for ln in r.stdout.splitlines()]
    per_line = [row for row in rows if row[3:] != [""]]  # the rest: tracebacks that ended at the end
    assert len(per_line) == SAMPLE.read_text(encoding="utf-8").count("\n")
    assert [int(row[0]) for row in per_line] == list(range(1, len(per_line) + 1))
    stats = cli("parse", str(SAMPLE), "--stats", "--year", "2026").stdout
    for result in ("parsed", "ignored", "unparsed"):
        n = sum(1 for row in per_line if row[1] == result)
        assert f"  {result}: {n}\n" in stats
    whats = {row[2] for row in per_line}
    assert {"access_log", "engine_stats", "spec_decode", "kv_transfer"} <= whats
    r = cli("parse", "-", "--explain", input="hello world\n(APIServer pid=1) INFO 08-04 02:00:00 [x.py:1] new thing\n")
    first, second = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert first[1] == "unparsed" and "no vLLM header" in first[2]
    assert second[1] == "ignored" and second[2] == "a vLLM INFO line that no parser wants"


def test_the_commands_write_to_stdout_as_it_is_when_they_run():
    """parse and test print to sys.stdout as it is when they run, not as it was when their module was
    imported (a default bound then kept a stream redirected at import, and closed since)."""
    import importlib
    import io
    from contextlib import redirect_stdout

    import exporter.commands.parse
    import exporter.commands.testing
    from exporter.cli import main

    gone = io.StringIO()
    with redirect_stdout(gone):
        importlib.reload(exporter.commands.parse)
        importlib.reload(exporter.commands.testing)
    gone.close()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["parse", "--stats", str(ROOT / "exporter" / "data" / "sample.log"), "--year", "2026"]) == 0
    assert "lines read:" in out.getvalue()
