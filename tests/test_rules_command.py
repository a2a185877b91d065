"""`vllm-log-exporter test`: what lines become under a user's rules, and a file of expectations that fails
(exit 1) when a line does not give what it should, through the real command line."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

# the seed article's lines (/work/shared/seed-article.txt)
UNLINKED = ("Aug 04 02:44:22 compute-server grandpa[572062]: (Worker_TP0 pid=264) INFO 08-04 02:44:22 "
            "[shared_offload_region.py:176] Unlinked mmap file /dev/shm/vllm_offload_f5388900-1119-46b2-b2eb-"
            "178e4b7e21c5.mmap after 2 workers mapped it")
SPEC = ("Aug 04 02:46:09 compute-server grandpa[572062]: (APIServer pid=53) INFO 08-04 02:46:09 [metrics.py:125] "
        "SpecDecoding metrics: Mean acceptance length: 5.90, Current speculative depth: 5, Accepted throughput: "
        "298.18 tokens/s, Drafted throughput: 303.98 tokens/s, Accepted: 2982 tokens, Drafted: 3040 tokens, "
        "Per-position acceptance rate: 1.000, 0.998, 0.993, 0.972, 0.941, Avg Draft acceptance rate: 98.1%")

RULES = {"rules": [
    {"name": "offload_workers", "pattern": r"Unlinked mmap file \S+ after (?P<workers>\d+) workers mapped it",
     "logger": "shared_offload_region.py", "fields": {"workers": "int"},
     "metrics": [{"name": "custom_offload_region_workers", "type": "gauge", "value": "workers"}]},
    {"name": "draft_depth", "pattern": r"Current speculative depth: (?P<depth>\d+)", "logger": "metrics.py",
     "metrics": [{"name": "custom_draft_windows_total", "type": "counter", "labels": {"depth": {"max_values": 8}}}]},
]}


def run(tmp_path, *args, stdin=None):
    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump(RULES))
    return subprocess.run([sys.executable, "-m", "exporter", "test", "--rules", str(rules), "--year", "2026", *args],
                          cwd=ROOT, capture_output=True, text=True, input=stdin, timeout=60)


def test_lines_are_explained(tmp_path):
    other = UNLINKED.replace("(Worker_TP0 pid=264) INFO 08-04 02:44:22 [shared_offload_region.py:176]",
                             "(Worker_TP0 pid=264) INFO 08-04 02:44:22 [other_region.py:9]")
    r = run(tmp_path, "-", stdin="\n".join([UNLINKED, SPEC, other]) + "\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "line 1: " + UNLINKED[:60] in out
    assert "  rule offload_workers: workers=2\n    custom_offload_region_workers 2\n" in out
    assert "  built-in spec_decode: mean_acceptance_length=5.9 " in out
    assert '  rule draft_depth: depth=5\n    custom_draft_windows_total{depth="5"} 1 (was' not in out
    assert '    custom_draft_windows_total{depth="5"} 1\n' in out
    assert "    vllm_log_spec_decode_depth{engine=\"0\"} 5\n" in out  # ours move too
    assert ("  rule offload_workers: its pattern matches, but its logger other_region.py:9 is not "
            "shared_offload_region.py\n") in out
    assert out.endswith("lines read: 3; rules matched: offload_workers 1, draft_depth 1\n")


def expect(tmp_path, tests):
    e = tmp_path / "e.yaml"
    e.write_text(yaml.safe_dump({"tests": tests}, sort_keys=False))
    return run(tmp_path, "--expect", str(e))


def test_expectations_pass(tmp_path):
    r = expect(tmp_path, [
        {"name": "workers", "line": UNLINKED, "rules": {"offload_workers": {"workers": 2}, "draft_depth": None},
         "series": {"custom_offload_region_workers": 2, "custom_draft_windows_total{depth='5'}": None},
         "builtin": []},
        {"lines": [SPEC, SPEC], "rules": {"draft_depth": {"depth": 5}},
         "series": {'custom_draft_windows_total{depth="5"}': 2, 'vllm_log_spec_decode_depth{engine="0"}': 5},
         "builtin": ["spec_decode"]},
    ])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == "ok    workers (tests[0])\nok    tests[1]\n2 tests, 0 failed\n"


def test_a_mismatch_fails_with_what_differs(tmp_path):
    r = expect(tmp_path, [
        {"name": "wrong", "line": UNLINKED, "rules": {"offload_workers": {"workers": 3}, "draft_depth": {}},
         "series": {"custom_offload_region_workers": 3, "custom_nothing_total": 1}},
        {"line": SPEC, "rules": {"offload_workers": None}},
    ])
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "FAIL  wrong (tests[0])",
        "      rule offload_workers: workers: expected 3, got 2",
        "      rule draft_depth: expected a match, got none",
        "      series custom_offload_region_workers: expected 3, got 2",
        "      series custom_nothing_total: expected 1, got absent",
        "ok    tests[1]",
        "2 tests, 1 failed",
    ]


def test_broken_rules_or_expectations_exit_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"rules": [dict(RULES["rules"][0], pattern="(?P<workers>")]}))
    r = subprocess.run([sys.executable, "-m", "exporter", "test", "--rules", str(bad)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"vllm-log-exporter: {bad}: rules[0] (offload_workers).pattern: invalid: "
                                     "missing ), unterminated subpattern at position 0"]
    r = expect(tmp_path, [{"line": UNLINKED, "rules": {"no_such_rule": {}}}])
    assert r.returncode == 2 and "tests[0].rules.no_such_rule: no such rule" in r.stderr
    r = expect(tmp_path, [{"lines": UNLINKED}])
    assert r.returncode == 2 and "tests[0].lines: expected a list of lines" in r.stderr
