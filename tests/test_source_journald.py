"""The journald source against a stand-in journalctl (no journald runs here) that speaks its JSON."""

import json
import stat
import sys

from exporter.sources.journald import JournaldSource, entry_to_lines, journal_matches
from tests.test_source_file import Follow

FAKE = r'''#!{python}
import json, sys, os, time
state = {state!r}
with open(state + ".argv", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
entries = [json.loads(l) for l in open(state + ".entries")]
after = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--after-cursor=")), None)
if after:
    i = [e["__CURSOR"] for e in entries].index(after)
    entries = entries[i + 1:]
runs = len(open(state + ".argv").readlines())
for e in entries[:2] if runs == 1 else entries:
    print(json.dumps(e), flush=True)
if runs == 1:
    print("boom", file=sys.stderr)
    sys.exit(1)  # the first journalctl dies after two entries
time.sleep(30)
'''


def test_matches_and_entry_decoding():
    assert journal_matches("grandpa") == ["_SYSTEMD_UNIT=grandpa.service", "+", "CONTAINER_NAME=grandpa", "+",
                                          "SYSLOG_IDENTIFIER=grandpa"]
    esc = list("\x1b[1;36m(APIServer pid=1)\x1b[0;0m hi".encode())
    assert entry_to_lines({"MESSAGE": esc, "__REALTIME_TIMESTAMP": "1785811461123456"}) == [
        "2026-08-04T02:44:21.123456Z \x1b[1;36m(APIServer pid=1)\x1b[0;0m hi"]
    assert entry_to_lines({"MESSAGE": None}) == []
    assert entry_to_lines({"MESSAGE": "a\nb"}) == ["a", "b"]


async def test_restarts_after_exit_and_resumes_after_the_cursor(tmp_path):
    state = str(tmp_path / "fake")
    with open(state + ".entries", "w") as f:
        for i in range(4):
            f.write(json.dumps({"__CURSOR": f"c{i}", "__REALTIME_TIMESTAMP": str(1785811461000000 + i),
                                "MESSAGE": f"line {i}"}) + "\n")
    script = tmp_path / "journalctl"
    script.write_text(FAKE.format(python=sys.executable, state=state))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    async with Follow(JournaldSource("gp", "grandpa", journalctl=str(script))) as fw:
        lines = await fw.wait_for(4, timeout=15)
        assert [l.split(" ", 1)[1] for l in lines] == ["line 0", "line 1", "line 2", "line 3"]
        assert fw.status.restarts == 1
        argv = [json.loads(l) for l in open(state + ".argv")]
        assert "-n" in argv[0] and "--all" in argv[0]
        assert "--after-cursor=c1" in argv[1]
