"""Kubernetes node logs end to end: the real exporter following a glob of CRI-format pod log files
laid out as kubelet does, through new pods, container restarts, kubelet's rename rotation, deleted
pods and lines split into partial records."""

import os

from exporter.sources.file_glob import server_for
from tests.helpers import Exporter, wait_until

STAMP = "2026-08-04T02:45:03.123456789Z"


def cri_access(stream, i):
    return f'{STAMP} {stream} F (APIServer pid=53) INFO:     127.0.0.1:{i} - "GET /v1/models HTTP/1.1" 200 OK\n'


def write(path, *records):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(records))


def test_server_label_is_the_namespace_and_pod_name():
    assert server_for("/var/log/pods/llm_vllm-7d9f-abcde_1b2c-3d/vllm/0.log") == "llm/vllm-7d9f-abcde"
    assert server_for("/srv/logs/grandpa.log") == "grandpa"


def test_glob_of_pod_logs_counts_every_line_once(tmp_path):
    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    write(a, *[cri_access("stdout", i) for i in range(10)])  # there before the exporter: not counted
    with Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--stats-interval", "10") as ex:
        def served(server):
            return ex.value("vllm_log_http_requests_total", server=server) or 0

        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="llm/vllm-a") == 1, 15, what="pod a followed")
        write(a, *[cri_access("stdout" if i % 2 else "stderr", i) for i in range(10, 30)])
        wait_until(lambda: served("llm/vllm-a") == 20, 15, what="20 new lines of pod a")

        b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"  # a new pod: read from its first line
        write(b, *[cri_access("stdout", i) for i in range(15)])
        wait_until(lambda: served("llm/vllm-b") == 15, 15, what="pod b's 15 lines")

        # kubelet's rotation: the last lines land in the old file, it is renamed, a new 0.log starts
        write(a, *[cri_access("stdout", i) for i in range(30, 35)])
        os.rename(a, a.with_name("0.log.20260804-024503"))
        write(a, *[cri_access("stdout", i) for i in range(35, 45)])
        wait_until(lambda: served("llm/vllm-a") == 35, 15, what="pod a across the rotation")

        # the container restarts: kubelet opens 1.log beside 0.log
        restarted = a.with_name("1.log")
        oom = ("(EngineCore_DP0 pid=312) ERROR 08-04 02:45:03 [core.py:710] torch.OutOfMemoryError: CUDA out of "
               "memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.10 GiB is free.")
        write(restarted, f"{STAMP} stderr P {oom[:50]}\n", cri_access("stdout", 45),
              f"{STAMP} stderr P {oom[50:100]}\n", f"{STAMP} stderr F {oom[100:]}\n")
        wait_until(lambda: served("llm/vllm-a") == 36 and ex.value("vllm_log_errors_total", server="llm/vllm-a", kind="oom") == 1,
                   15, what="the restarted container's lines, the split OOM as one")

        # the pod is deleted: its files go; the exporter lets them go and keeps serving
        for p in sorted(b.parent.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        b.parent.rmdir()
        b.parent.parent.rmdir()
        import time
        time.sleep(5)
        final = {s: served(s) for s in ("llm/vllm-a", "llm/vllm-b")}
        assert ex.value("vllm_log_exporter_lines_total", server="llm/vllm-a", result="unparsed") == 0
        log = ex.stop()
    assert final == {"llm/vllm-a": 36, "llm/vllm-b": 15}
    assert "file gone, no longer followed" in log


def test_a_replaced_pod_s_series_are_dropped_once_its_files_are_gone(tmp_path):
    """Every rollout makes new pod names: a gone pod's series (counters too) leave /metrics a while
    after its files went (--forget-gone-after); the live pod's stay, and each pod's namespace and
    container are in vllm_log_kubernetes_pod_info."""
    from tests.helpers import http_get, samples

    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"
    write(a, "")
    write(b, "")
    with Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--forget-gone-after", "1") as ex:
        def series_of(server):
            _, text = http_get(f"http://127.0.0.1:{ex.port}/metrics")
            return [k for k in samples(text) if dict(k[1]).get("server") == server]

        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="llm/vllm-b") == 1, 15, what="pod b followed")
        write(a, *[cri_access("stdout", i) for i in range(3)])
        write(b, *[cri_access("stdout", i) for i in range(5)])
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="llm/vllm-b") == 5, 15, what="pod b's lines")
        assert ex.value("vllm_log_kubernetes_pod_info", server="llm/vllm-b", namespace="llm", pod="vllm-b",
                        container="vllm") == 1
        assert len(series_of("llm/vllm-b")) > 20
        for p in sorted(b.parent.parent.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        b.parent.parent.rmdir()
        wait_until(lambda: series_of("llm/vllm-b") == [], 30, 0.5, what="pod b's series dropped")
        assert ex.value("vllm_log_http_requests_total", server="llm/vllm-a") == 3
        assert ex.value("vllm_log_kubernetes_pod_info", server="llm/vllm-a", namespace="llm", pod="vllm-a",
                        container="vllm") == 1
        log = ex.stop()
    assert "pod gone, its series dropped" in log


def test_two_pods_of_one_name_in_two_namespaces_are_two_servers(tmp_path):
    """A StatefulSet's vllm-0 in two namespaces on one node: two servers, each counted apart."""
    pods = tmp_path / "pods"
    llm = pods / "llm_vllm-0_uid-1" / "vllm" / "0.log"
    team = pods / "team-b_vllm-0_uid-2" / "vllm" / "0.log"
    write(llm, "")
    write(team, "")
    with Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log")) as ex:
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="team-b/vllm-0") == 1, 15, what="both pods")
        write(llm, *[cri_access("stdout", i) for i in range(3)])
        write(team, *[cri_access("stdout", i) for i in range(7)])
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="team-b/vllm-0") == 7, 15, what="team-b's")
        assert ex.value("vllm_log_http_requests_total", server="llm/vllm-0") == 3
        assert ex.value("vllm_log_http_requests_total", server="vllm-0") is None
        assert ex.value("vllm_log_kubernetes_pod_info", server="team-b/vllm-0", namespace="team-b", pod="vllm-0",
                        container="vllm") == 1


def test_a_link_out_of_the_pods_tree_is_not_followed_and_kubelets_own_links_are(tmp_path):
    """As uid 0 the exporter could read any file a link points at: a file linked (or sitting under a
    directory linked) from outside the glob's directory is refused with one warning each; kubelet's
    /var/log/containers links into /var/log/pods are followed, labelled with their pod."""
    import json
    import time

    pods, containers = tmp_path / "pods", tmp_path / "containers"
    outside = tmp_path / "etc" / "secret.log"
    write(outside, *[cri_access("stdout", i) for i in range(4)])
    write(tmp_path / "elsewhere" / "vllm" / "0.log", *[cri_access("stdout", i) for i in range(4)])
    real = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    write(real, "")
    (pods / "llm_vllm-x_uid-2" / "vllm").mkdir(parents=True)
    (pods / "llm_vllm-x_uid-2" / "vllm" / "0.log").symlink_to(outside)  # a file linked out
    (pods / "llm_vllm-y_uid-3").symlink_to(tmp_path / "elsewhere")  # a pod directory linked out
    containers.mkdir()
    (containers / "vllm-a_llm_vllm-0123abcd.log").symlink_to(real)  # kubelet's link
    (containers / "vllm-z_llm_vllm-4567ef01.log").symlink_to(outside)

    for glob_ in (str(pods / "*_vllm-*" / "*" / "*.log"), str(containers / "*.log")):
        with Exporter("--source", glob_, "--from-start") as ex:
            wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="llm/vllm-a") == 1, 15, what="pod a")
            write(real, *[cri_access("stdout", i) for i in range(5)])
            wait_until(lambda: ex.value("vllm_log_http_requests_total", server="llm/vllm-a") == 5, 15, what="a's lines")
            time.sleep(4.5)  # two more looks at the glob: still refused, still one warning each
            servers = {dict(labels).get("server") for (_, labels) in ex.metrics()}
            assert servers - {None} == {"llm/vllm-a"}, servers
            err = ex.stop()
        refused = [json.loads(x) for x in err.splitlines()
                   if x.startswith("{") and "a symbolic link out of the followed directories" in x]
        assert {(r["path"], r["target"]) for r in refused} == (
            {(str(pods / "llm_vllm-x_uid-2" / "vllm" / "0.log"), str(outside)),
             (str(pods / "llm_vllm-y_uid-3"), str(tmp_path / "elsewhere"))} if glob_.startswith(str(pods)) else
            {(str(containers / "vllm-z_llm_vllm-4567ef01.log"), str(outside))}), refused
        real.write_text("")


def test_a_pod_directory_that_cannot_be_listed_is_reported_not_invisible(tmp_path):
    """Without CAP_DAC_OVERRIDE/READ_SEARCH (the chart drops every capability) uid 0 meets directory
    modes like anyone: a pod directory it cannot list is a warning and that pod's source_up 0 (the
    glob's own name for the pods directory itself), then read once it can be."""
    import json
    import shutil

    import pytest

    from tests.helpers import http_get

    if not shutil.which("setpriv"):
        pytest.skip("setpriv not installed")
    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"
    write(a, "")
    write(b, *[cri_access("stdout", i) for i in range(6)])
    b.parent.parent.chmod(0o000)
    ex = Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"),
                  wrapper=("setpriv", "--bounding-set=-dac_override,-dac_read_search"))
    ex.start()
    try:
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="llm/vllm-b") == 0, 15, what="b reported")
        assert ex.value("vllm_log_exporter_source_up", server="llm/vllm-a") == 1
        assert ex.value("vllm_log_errors_total", server="llm/vllm-b") is None  # never read: absent, not 0
        assert json.loads(http_get(ex.url + "/healthz")[1])["sources"]["llm/vllm-b"] is False
        b.parent.parent.chmod(0o755)
        # a file first seen now is read from its first line: the 6 lines were never counted
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="llm/vllm-b") == 6, 15, what="b read")
        assert ex.value("vllm_log_exporter_source_up", server="llm/vllm-b") == 1
        pods.chmod(0o000)  # the pods directory itself
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="pods") == 0, 15, what="the glob reported")
        pods.chmod(0o755)
        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="pods") is None, 15, what="its series gone")
    finally:
        pods.chmod(0o755)
        b.parent.parent.chmod(0o755)
        err = ex.stop()
    warned = [json.loads(x) for x in err.splitlines() if x.startswith("{") and "cannot be listed" in x]
    assert [(w["directory"], w["server"]) for w in warned] == [(str(b.parent.parent), "llm/vllm-b"),
                                                               (str(pods), "pods")], warned


def test_a_followed_file_swapped_for_a_link_or_a_fifo_is_not_opened(tmp_path):
    """The glob looks every 2 s; what is opened is checked again when it is opened (what the
    descriptor points at), and opening cannot hang on a FIFO put in the file's place."""
    from exporter.sources.file import FileSource

    root = tmp_path / "pods"
    path = root / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    write(path, "x\n")
    src = FileSource("s", str(path), within=(str(root),))
    f, ident = src._open(str(path))
    assert f is not None
    f.close()
    outside = tmp_path / "secret"
    outside.write_text("y\n")
    path.unlink()
    path.symlink_to(outside)
    assert src._open(str(path)) == (None, None)
    path.unlink()
    os.mkfifo(path)
    assert src._open(str(path)) == (None, None)
    # the pod's directory swapped for a link out of the tree
    path.unlink()
    (tmp_path / "elsewhere" / "vllm").mkdir(parents=True)
    (tmp_path / "elsewhere" / "vllm" / "0.log").write_text("z\n")
    os.rename(path.parent.parent, tmp_path / "old")
    path.parent.parent.symlink_to(tmp_path / "elsewhere")
    assert src._open(str(path)) == (None, None)
    assert FileSource("s", str(path))._open(str(path))[0] is not None  # a file source of its own: the user's choice


def test_the_state_file_holds_the_files_followed_now_only(tmp_path):
    """The state file's size is bounded by what is followed: a pod's entries leave with its files."""
    import json

    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"
    write(a, cri_access("stdout", 0))
    write(b, cri_access("stdout", 0))
    state = tmp_path / "state.json"
    with Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--state-file", str(state)):
        def entries():
            return sorted(json.loads(state.read_text())["sources"]) if state.exists() else None

        wait_until(lambda: entries() == [f"pods:{a}", f"pods:{b}"], 15, what="both files in the state")
        for p in sorted(b.parent.parent.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        b.parent.parent.rmdir()
        wait_until(lambda: entries() == [f"pods:{a}"], 15, what="b's entry gone with its files")
