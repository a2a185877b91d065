"""The journald source's pure parts; the following itself is tested against the real journalctl in
tests/test_source_journald_real.py."""

from exporter.sources.journald import JournaldSource, entry_to_lines, journal_matches


def test_matches_cover_system_and_user_units_containers_and_identifiers():
    assert journal_matches("grandpa") == ["_SYSTEMD_UNIT=grandpa.service", "+", "_SYSTEMD_USER_UNIT=grandpa.service",
                                          "+", "CONTAINER_NAME=grandpa", "+", "SYSLOG_IDENTIFIER=grandpa",
                                          "+", "UNIT=grandpa.service", "_PID=1", "+", "USER_UNIT=grandpa.service"]


def test_entry_decoding():
    esc = list("\x1b[1;36m(APIServer pid=1)\x1b[0;0m hi".encode())
    assert entry_to_lines({"MESSAGE": esc, "__REALTIME_TIMESTAMP": "1785811461123456"}) == [
        "2026-08-04T02:44:21.123456Z \x1b[1;36m(APIServer pid=1)\x1b[0;0m hi"]
    assert entry_to_lines({"MESSAGE": None}) == []
    assert entry_to_lines({"MESSAGE": "a\nb"}) == ["a", "b"]


def test_the_service_managers_entries_carry_its_tag():
    """PID 1's (or a user manager's) word on the unit reads as `journalctl -o short` shows it, so that
    framing knows it for systemd's and a program's own bare "Stopping ..." is not taken for its stop job."""
    pid1 = {"MESSAGE": "Stopping vLLM server...", "SYSLOG_IDENTIFIER": "systemd", "UNIT": "vllm.service",
            "_PID": "1", "__REALTIME_TIMESTAMP": "1785811461123456"}
    assert entry_to_lines(pid1) == ["2026-08-04T02:44:21.123456Z systemd[1]: Stopping vLLM server..."]
    user = dict(pid1, UNIT=None, _PID="1800", MESSAGE="vllm.service: Failed with result 'timeout'.")
    del user["UNIT"]
    user["USER_UNIT"] = "vllm.service"
    assert entry_to_lines(user) == ["2026-08-04T02:44:21.123456Z systemd[1800]: vllm.service: Failed with result 'timeout'."]
    own = {"MESSAGE": "Stopping server loop...", "SYSLOG_IDENTIFIER": "vllm", "_SYSTEMD_UNIT": "vllm.service"}
    assert entry_to_lines(own) == ["Stopping server loop..."]


def test_follow_command_never_tails_and_resumes_after_the_cursor():
    s = JournaldSource("gp", "grandpa", directory="/host/journal", resume={"cursor": "s=1;i=2"})
    cmd = s.command()
    assert "--no-tail" in cmd and "--merge" in cmd and "-n" not in cmd
    assert "--directory=/host/journal" in cmd and "--after-cursor=s=1;i=2" in cmd
    assert s.checkpoint() == {"cursor": "s=1;i=2"}
    assert JournaldSource("gp", "grandpa", resume={"cursor": 5}).checkpoint() is None
