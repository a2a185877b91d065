"""`report`'s "Engine operations" section: sleep mode, EPLB, elastic data-parallel scaling, V0's preemption
warning, the engine found hung, and diffusion decoding, from lines of tests/fixtures/real_lines/issue36.yaml
(real, or rendered from the released wheels' format strings) at times of our choosing; the figures worked
out by hand. A run without such lines: the report is byte for byte what it was without the section."""

from __future__ import annotations

import json
from datetime import timezone
import re
import subprocess
import sys

import pytest
import yaml

from exporter.offline.report import engine_ops
from exporter.offline.report.stats import RunStats
from tests.conftest import ROOT, SAMPLE, SAMPLE_LMCACHE, SAMPLE_V0, run_lines

ENTRIES = yaml.safe_load((ROOT / "tests" / "fixtures" / "real_lines" / "issue36.yaml").read_text(encoding="utf-8"))


def _line(family: str, at: str | None = None) -> str:
    """The fixture's line of that family; ``at`` (HH:MM:SS) its time, a bare message given vLLM's prefix."""
    line = next(e["line"] for e in ENTRIES if e["family"] == family)
    if at is not None:
        if re.search(r" \d\d-\d\d \d\d:\d\d:\d\d ", line):
            line = re.sub(r"(\d\d-\d\d) \d\d:\d\d:\d\d", rf"12-04 {at}", line, count=1)
        else:  # a bare message (quoted from a thread): as vLLM's executor prints it
            line = f"(EngineCore_DP0 pid=11) INFO 12-04 {at} [abstract.py:262] {line}"
    return line


BANNER = ["(APIServer pid=1) INFO 12-04 09:59:00 [api_server.py:1] vLLM API server version 0.34.0",
          "(APIServer pid=1) INFO 12-04 09:59:01 [api_utils.py:273] non-default args: {'model': '/models/moe', "
          "'data_parallel_size': 2, 'enable_eplb': True}",
          "(APIServer pid=1) INFO 12-04 09:59:30 [launcher.py:1] Application startup complete."]

SLEEP = [_line("sleep mode, falling asleep (an RL reward server's measurement, the message alone)", "10:00:00"),
         _line("sleep mode, waking up by tags (0.11.2+)", "10:00:05"),
         _line("sleep mode, falling asleep (an RL reward server's measurement, the message alone)", "10:00:10")
         .replace("0.744026", "1.250000"),
         _line("sleep mode, waking up (0.7.3's wording, the message alone)", "10:00:15"),
         _line("sleep mode, tags discarded (0.31+)", "10:00:20")]
EPLB = [_line("EPLB step (0.9.2-0.10.2)", "10:01:00"),
        _line("EPLB step with the balance of the experts' load (0.14.1+)", "10:01:10"),
        _line("EPLB step with the balance of the experts' load (0.14.1+)", "10:01:20").replace("0.7275", "0.9100"),
        _line("EPLB rearranged the experts in the start-up profile run (0.9.2-0.13.0)", "10:01:21"),
        _line("EPLB rearranged the experts while serving (0.14.1+, the argument is a space when not the profile run)",
              "10:01:22"),
        _line("EPLB rearranged the experts while serving (0.14.1+, the argument is a space when not the profile run)",
              "10:01:23").replace("1.87", "2.13"),
        _line("EPLB's async worker rearranged the experts (0.34)", "10:01:24"),
        _line("EPLB skipped a rearrangement (0.27.1+)", "10:01:25"),
        _line("EPLB step with the balance of the experts' load (0.14.1+)", "10:01:30").replace("0.7275", "0.8000")]
SCALE = [_line("elastic data-parallel scale-up completed (0.10.2+)", "10:05:00"),
         _line("the coordinator's word for the same scaling (not counted twice)", "10:05:00"),
         _line("elastic data-parallel scale-down completed (0.10.2+)", "10:09:00")]
HANGS = [_line("the watchdog dumped the stacks of a loop not fed in time (0.33+)", "10:10:00"),
         _line("the watchdog dumped the stacks of a loop not fed in time (0.33+)", "10:12:30")]
DIFFUSION = [_line("diffusion decoding's window (0.24+)", "10:20:00"),
             _line("diffusion decoding's window (0.24+)", "10:20:10")
             .replace("Committed token throughput: 41.20", "Committed token throughput: 58.80")
             .replace("Committed: 412", "Committed: 588").replace("Denoising steps: 100", "Denoising steps: 120")]
V0 = [_line("V0 preemption warning (every 50th preemption, with the count so far)", "10:00:00").replace("=51", "=1"),
      _line("V0 preemption warning (every 50th preemption, with the count so far)", "10:03:00"),
      _line("V0's engine iteration timed out (the engine is marked dead)", "10:04:00")]


def report(lines, *args) -> str:
    r = subprocess.run([sys.executable, "-m", "exporter", "report", "-", "--year", "2026", "--timezone", "UTC", *args],
                       cwd=ROOT, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_fixture_lines_are_what_this_test_means():
    _, events = run_lines(SLEEP + EPLB + SCALE + HANGS + DIFFUSION + V0)
    kinds = [ev.kind for ev in events if ev.kind in engine_ops.EngineOps(None).handlers()]
    assert kinds.count("sleep_mode") == 5 and kinds.count("eplb") == 9 and kinds.count("dp_scale") == 2
    assert kinds.count("engine_hang") == 3 and kinds.count("diffusion_decoding") == 2 and kinds.count("preemption") == 2
    assert all(ev.ts is not None for ev in events if ev.kind in ("sleep_mode", "eplb", "engine_hang"))


def test_the_section_s_figures():
    e = json.loads(report(BANNER + SLEEP + EPLB + SCALE + HANGS + DIFFUSION, "--format", "json"))["engine_ops"]
    sleep = e["sleep_mode"]
    assert list(sleep) == ["sleep", "wake_up", "discard"]
    assert sleep["sleep"] == {"count": 2, "seconds": pytest.approx(0.744026 + 1.25), "longest_seconds": 1.25}
    assert sleep["wake_up"] == {"count": 2, "seconds": pytest.approx(2.513807 + 0.779162), "longest_seconds": 2.513807}
    assert sleep["discard"] == {"count": 1, "seconds": 0.105, "longest_seconds": 0.105}
    eplb = e["eplb"]
    # balancedness 0.5, 0.7275, 0.91, 0.8: the median is (0.7275 + 0.8) / 2, the last 0.8
    assert eplb["steps"] == 4 and eplb["balancedness_median"] == pytest.approx(0.76375)
    assert (eplb["balancedness_last"], eplb["balancedness_lowest"]) == (0.8, 0.5)
    assert eplb["rearranged"] == {"async": {"count": 1, "seconds": 2.3}, "profile": {"count": 1, "seconds": 0.42},
                                  "sync": {"count": 2, "seconds": pytest.approx(1.87 + 2.13)}}
    assert eplb["skipped"] == 1
    # the coordinator's "scaled up from 2 to 4" is the same scaling: counted once; the size before the first
    # is the start's data_parallel_size
    assert e["dp_scale"]["scalings"] == 2
    up, down = e["dp_scale"]["last"]
    assert (up["direction"], up["from"], up["to"]) == ("up", 2, 4) and (down["from"], down["to"]) == (4, 2)
    assert down["ts"] - up["ts"] == 240
    (hang,) = e["engine_hang"].values()
    assert list(e["engine_hang"]) == ["watchdog"] and hang["count"] == 2 and hang["last"] - hang["first"] == 150
    d = e["diffusion_decoding"]
    assert (d["windows"], d["committed_tokens"], d["denoising_steps"], d["canvas_positions"]) == (2, 1000, 220, 6400)
    assert d["tokens_per_denoising_step"] == pytest.approx(1000 / 220) and d["committed_tokens_per_second_peak"] == 58.8
    assert "preemption" not in e  # no line said any: absent, not 0


def test_the_markdown_and_html_say_it_in_the_log_s_words(tmp_path):
    page = tmp_path / "r.html"
    md = report(BANNER + SLEEP + EPLB + SCALE + HANGS + DIFFUSION, "--html", str(page), "--format", "markdown")
    section = md[md.index("## Engine operations"):md.index("## KV offload")]
    assert "| fall asleep | 2 | 1.994 s | 1.250 s |" in section
    assert "| wake up | 2 | 3.293 s | 2.514 s |" in section and "| discard tags | 1 | 0.105 s | 0.105 s |" in section
    assert "| Balancedness (avg_tokens / max_tokens; 1 is even): median / last / lowest | 0.7638 / 0.8000 / 0.5000 |" \
        in section
    assert "| Rearranged experts (while serving) | 2 in 4.000 s |" in section
    assert "| Async EPLB rearranged | 1 in 2.300 s |" in section
    assert "| [EPLB] Skip rearrange (no material gain) | 1 |" in section
    assert "| Scale up | 2026-12-04 10:05:00 UTC | 2 → 4 |" in section
    assert "| Scale down | 2026-12-04 10:09:00 UTC | 4 → 2 |" in section
    assert ("| [Watchdog] Dumped stack (the loop was not fed within its timeout) | 2 | 2026-12-04 10:10:00 UTC | "
            "2026-12-04 10:12:30 UTC |") in section
    assert "| Tokens committed per denoising step (Committed / Denoising steps, the run) | 4.55 |" in section
    assert "Engine iteration timed out" not in section and "V0 preempted" not in section
    html = page.read_text(encoding="utf-8")
    assert "<h2>Engine operations</h2>" in html and "<td>[EPLB] Skip rearrange (no material gain)</td>" in html
    assert "<td>2 → 4</td>" in html


def test_v0_preemptions_and_iteration_timeout():
    md = report(V0)
    assert ("V0 preempted sequence groups (not enough KV cache space): 51 by its total_num_cumulative_preemption, "
            "in 2 warnings (V0 warns at the 1st, 51st, 101st...); warnings by mode: recompute 2.") in md
    assert "| Engine iteration timed out (V0; the engine is marked dead) | 1 | 2026-12-04 10:04:00 UTC |" in md
    for absent in ("Sleep mode", "| EPLB |", "Elastic EP", "Diffusion decoding", "Watchdog"):
        assert absent not in md


def test_only_what_the_log_said_and_no_size_before_a_scaling_nobody_gave():
    _, events = run_lines([SCALE[0], EPLB[4]])
    s = RunStats()
    for ev in events:
        s.add(ev)
    e = s.summary()["engine_ops"]
    assert set(e) == {"eplb", "dp_scale"} and set(e["eplb"]) == {"rearranged"}
    (row,) = e["dp_scale"]["last"]
    assert "from" not in row and row["to"] == 4
    assert "| Scale up | 2026-12-04 10:05:00 UTC | new size 4 |" in "\n".join(engine_ops.markdown(e))


def test_a_restart_forgets_the_scaled_size():
    restart = BANNER[0].replace("09:59:00", "10:06:00")
    _, events = run_lines(BANNER + [SCALE[0], restart, SCALE[2]])
    s = RunStats()
    for ev in events:
        s.add(ev)
    up, down = s.summary()["engine_ops"]["dp_scale"]["last"]
    assert up["from"] == 2 and "from" not in down  # the new start logged no data_parallel_size


def test_a_time_range_holds_the_section_too():
    e = json.loads(report(BANNER + SLEEP + EPLB, "--format", "json", "--since", "2026-12-04T10:00:12+00:00",
                          "--until", "2026-12-04T10:01:05+00:00"))["engine_ops"]
    assert e["sleep_mode"] == {"wake_up": {"count": 1, "seconds": 0.779162, "longest_seconds": 0.779162},
                               "discard": {"count": 1, "seconds": 0.105, "longest_seconds": 0.105}}
    assert e["eplb"] == {"steps": 1, "balancedness_median": 0.5, "balancedness_last": 0.5, "balancedness_lowest": 0.5}


@pytest.mark.parametrize("path", [SAMPLE, SAMPLE_V0, SAMPLE_LMCACHE], ids=lambda p: p.name)
def test_a_run_without_them_is_reported_as_before(path, monkeypatch):
    """The report with the section's collector unhooked (the report before it) and with it: the same bytes."""
    from exporter.commands.report import read_run
    from exporter.framing.clock import Clock
    from exporter.offline.report import markdown

    def both():
        stats, summary = read_run(str(path), Clock(year=2026, tz=timezone.utc), None, None)
        return json.dumps(summary, sort_keys=True, default=str), markdown.render(summary, "r")

    with_section = both()
    monkeypatch.setattr(engine_ops.EngineOps, "handlers", lambda self: {})
    assert both() == with_section
    assert "engine_ops" not in with_section[0] and "Engine operations" not in with_section[1]
