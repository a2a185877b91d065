"""A user's rule cannot stall the daemon (issue 43 item 5): `(?P<name>\\w+) loaded`, which the load-time
check lets through, cost 10 ms a line over 2 KB lines with Python's re (quadratic), and 1,000 such
lines held the event loop 10 s. Long texts are matched by RE2 (linear) wherever it says what re says
(exporter.config.rule_regex), and a runner yields by time (tests/test_responsive.py). Here: RE2 and re
give the same matches for the patterns translated, and which engine matches a rule is said."""

import re

import pytest
from hypothesis import given, settings, strategies as st

from exporter.config import rule_regex
from exporter.config.rule_regex import SHORT_CHARS, compile_rule, translate

pytestmark = pytest.mark.skipif(rule_regex.re2 is None, reason="google-re2 has no wheel on this platform")

# pieces of Python patterns whose RE2 translation must say the same
PIECES = [r"\w+", r"\w*", r"\d+", r"\d{1,3}", r"\s+", r"\S+", r"\W", r"\D+", r"[\w.-]+", r"[\d,]+", r"[^\s]+",
          r"[a-z]+", r"(?P<a>\w+)", r"(?P<b>\d+)", r"(?:x|yz)", r".", r".*?", r"[^,]*", r"loaded", r" ", r": ",
          r"é+", r"\u00e9", r"a{,2}", r"\.", r"(?P<c>[\s\S]{2})", r"^", r"$", r"\Z"]
TEXT = st.text(alphabet=st.sampled_from(list("ab xyz loaded0123456789.,:-_é٣Ж中\u00a0\u2028\t\x0b\x1c\x85\n") + ["\U0001f600"]),
               max_size=60)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=5), st.lists(TEXT, min_size=1, max_size=4))
def test_the_translation_matches_what_re_matches(pieces, texts):
    import re2

    pattern = "".join(p.replace("(?P<", f"(?P<g{i}") for i, p in enumerate(pieces))  # (each group named once)
    try:
        py = re.compile(pattern)
    except re.error:
        return
    try:
        text, ascii_only = translate(pattern)
    except rule_regex._Untranslatable:
        return
    fast = re2.compile(text)
    for t in texts:
        if ascii_only and not t.isascii() or "$" in pattern and "\n" in t:
            continue  # (what the matcher gives re, as rule_regex._Split does)
        a, b = py.search(t), fast.search(t)
        assert (a is None) == (b is None), (pattern, text, t)
        if a is not None:
            assert a.span() == b.span() and a.groupdict() == b.groupdict(), (pattern, text, t)


def test_the_issue_s_rule_is_matched_by_re2_on_long_lines_and_by_re_on_short_ones():
    pattern = r"(?P<name>\w+) loaded"
    matcher, engine = compile_rule(pattern, re.compile(pattern))
    assert engine == "re2 past 512 characters, re otherwise"
    long_line = "w" * 2000 + " x loaded"
    assert matcher.search(long_line, 0, 4096).group("name") == "x"
    assert type(matcher.fast.search(long_line)).__module__ == "re2"
    assert matcher.search("abc loaded", 0, 2048).group("name") == "abc"


@pytest.mark.parametrize("pattern, engine", [
    (r"\bdepth: (?P<d>\d+)", "re2 past 512 characters of ASCII text, re otherwise"),
    (r"(?<=depth: )(?P<d>\d+)", "re"),  # a lookbehind: RE2 has none
    (r"(?P<a>x)(?P=a)", "re"),
])
def test_what_re2_cannot_say_alike_is_matched_by_re(pattern, engine):
    matcher, got = compile_rule(pattern, re.compile(pattern))
    assert got == engine
    text = "é " * 300 + "depth: 7" if engine != "re" else "xx depth: 7"
    assert (matcher.search(text, 0, 4096) is None) == (re.search(pattern, text) is None)


def test_the_test_command_says_which_engine_matches_each_rule(tmp_path):
    import subprocess
    import sys

    import yaml

    from tests.conftest import ROOT

    rules = tmp_path / "r.yaml"
    rules.write_text(yaml.safe_dump({"rules": [
        {"name": "loaded", "pattern": r"(?P<name>\w+) loaded", "metrics": [{"name": "t_loaded_total", "type": "counter"}]},
        {"name": "look", "pattern": r"(?<=depth: )(?P<d>\d+) tokens", "metrics": [{"name": "t_look_total", "type": "counter"}]},
    ]}))
    r = subprocess.run([sys.executable, "-m", "exporter", "test", "--rules", str(rules)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"  loaded: matched by re2 past {SHORT_CHARS} characters, re otherwise\n" in r.stdout
    assert "  look: matched by re\n" in r.stdout
