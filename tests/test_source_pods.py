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


def test_server_label_is_the_pod_name():
    assert server_for("/var/log/pods/llm_vllm-7d9f-abcde_1b2c-3d/vllm/0.log") == "vllm-7d9f-abcde"
    assert server_for("/srv/logs/grandpa.log") == "grandpa"


def test_glob_of_pod_logs_counts_every_line_once(tmp_path):
    pods = tmp_path / "pods"
    a = pods / "llm_vllm-a_uid-1" / "vllm" / "0.log"
    write(a, *[cri_access("stdout", i) for i in range(10)])  # there before the exporter: not counted
    with Exporter("--source", str(pods / "*_vllm-*" / "*" / "*.log"), "--stats-interval", "10") as ex:
        def served(server):
            return ex.value("vllm_log_http_requests_total", server=server) or 0

        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="vllm-a") == 1, 15, what="pod a followed")
        write(a, *[cri_access("stdout" if i % 2 else "stderr", i) for i in range(10, 30)])
        wait_until(lambda: served("vllm-a") == 20, 15, what="20 new lines of pod a")

        b = pods / "llm_vllm-b_uid-2" / "vllm" / "0.log"  # a new pod: read from its first line
        write(b, *[cri_access("stdout", i) for i in range(15)])
        wait_until(lambda: served("vllm-b") == 15, 15, what="pod b's 15 lines")

        # kubelet's rotation: the last lines land in the old file, it is renamed, a new 0.log starts
        write(a, *[cri_access("stdout", i) for i in range(30, 35)])
        os.rename(a, a.with_name("0.log.20260804-024503"))
        write(a, *[cri_access("stdout", i) for i in range(35, 45)])
        wait_until(lambda: served("vllm-a") == 35, 15, what="pod a across the rotation")

        # the container restarts: kubelet opens 1.log beside 0.log
        restarted = a.with_name("1.log")
        oom = ("(EngineCore_DP0 pid=312) ERROR 08-04 02:45:03 [core.py:710] torch.OutOfMemoryError: CUDA out of "
               "memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of which 1.10 GiB is free.")
        write(restarted, f"{STAMP} stderr P {oom[:50]}\n", cri_access("stdout", 45),
              f"{STAMP} stderr P {oom[50:100]}\n", f"{STAMP} stderr F {oom[100:]}\n")
        wait_until(lambda: served("vllm-a") == 36 and ex.value("vllm_log_errors_total", server="vllm-a", kind="oom") == 1,
                   15, what="the restarted container's lines, the split OOM as one")

        # the pod is deleted: its files go; the exporter lets them go and keeps serving
        for p in sorted(b.parent.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        b.parent.rmdir()
        b.parent.parent.rmdir()
        import time
        time.sleep(5)
        final = {s: served(s) for s in ("vllm-a", "vllm-b")}
        assert ex.value("vllm_log_exporter_lines_total", server="vllm-a", result="unparsed") == 0
        log = ex.stop()
    assert final == {"vllm-a": 36, "vllm-b": 15}
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

        wait_until(lambda: ex.value("vllm_log_exporter_source_up", server="vllm-b") == 1, 15, what="pod b followed")
        write(a, *[cri_access("stdout", i) for i in range(3)])
        write(b, *[cri_access("stdout", i) for i in range(5)])
        wait_until(lambda: ex.value("vllm_log_http_requests_total", server="vllm-b") == 5, 15, what="pod b's lines")
        assert ex.value("vllm_log_kubernetes_pod_info", server="vllm-b", namespace="llm", pod="vllm-b",
                        container="vllm") == 1
        assert len(series_of("vllm-b")) > 20
        for p in sorted(b.parent.parent.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        b.parent.parent.rmdir()
        wait_until(lambda: series_of("vllm-b") == [], 30, 0.5, what="pod b's series dropped")
        assert ex.value("vllm_log_http_requests_total", server="vllm-a") == 3
        assert ex.value("vllm_log_kubernetes_pod_info", server="vllm-a", namespace="llm", pod="vllm-a",
                        container="vllm") == 1
        log = ex.stop()
    assert "pod gone, its series dropped" in log
