"""KV moved between servers or tiers that did not arrive: the KV connectors of prefill/decode
disaggregation (NIXL, Mooncake) and vLLM's own KV offload (its CPU, file-system, object-store and P2P
tiers) logging a failed transfer, handshake or lookup, a stalled tier, a lease that expired.

Wordings, from the released wheels (catalogue/vllm-log-calls.jsonl; decisions.yaml's groups "NIXL connector
transfer and handshake failures", "Mooncake connector and store failures", "KV-offload transfer failures
and tier-poll stalls"):

- NIXL (``kv_connector/v1/nixl_connector.py`` 0.9-0.19, ``v1/nixl/*`` 0.20-0.34): ``NIXL transfer failure:
  %s | Context: %s`` (ERROR, 0.14+), ``NIXL transfer failed for request %s with state %s.``, ``NIXL
  transfer exception for request %s.``, ``NIXL transfer setup/initiation failed for request %s.`` (0.11-0.13),
  ``Handshake failed for request %s, ...``, ``Handshake with %s failed``, ``Failed handshake to D %s for push
  %s``, ``NIXL send_notif failed for request %s: ...``, ``NixlPushConnector: registration for request %s
  timed out after %.1fs ...``, ``Potentially invalid KV blocks for unrecognized request %s were retrieved
  ...``, ``Releasing expired KV blocks for request %s which were retrieved by %d ...``, ``NIXL is not
  available``.
- Mooncake (vLLM's ``kv_connector/v1/mooncake*`` 0.13-0.34, V0's pipe and store 0.6-0.12, Mooncake's own
  ``mooncake_connector_v1.py``, whose lines reach the log bare: its ``mooncake.*`` logger is outside vLLM's
  logging config, so Python's last-resort handler prints the message alone): ``Error happens during
  tran(s)fering kvcache for %s...``, ``pulling kv_caches for %s failed: %s``, ``Sending to %s failed (ret=%s)
  after %s (%d descriptors, %d bytes)``, ``Error processing Mooncake xfer request: %s``, ``Error in Mooncake
  sender thread: %s. Exiting thread.``, ``MooncakeAgentMetadata``/``MooncakeXferMetadata transfer failed for
  %s: %s``, ``Error processing Mooncake handshake: %s``, the bootstrap server's ``Failed to connect to
  bootstrap server``, ``Error registering %s with bootstrap server``, ``Failed to find remote engine_id``,
  ``Bootstrap query/registration ... failed``, ``Timeout waiting for P side ready: %s``, ``KV lease of request
  %s expired before the decoder pulled it.``, V0's ``Transfer Return Error`` and ``Failed to receive ACK from
  the receiver``, the store's ``Failed to get value from``/``Failed to put value into Mooncake Store``,
  ``(Async )?Mooncake lookup failed for %s``, ``Failed to put key %s``, ``batch_put failed: %d/%d keys failed``.
- KV offload (``v1/kv_offload/**``, 0.11-0.34): ``KV offload %s transfer failed for job %d[ while polling
  for completion]`` (``GPU->CPU``: store, ``CPU->GPU``: load), ``KV offload transfer for job %d failed while
  waiting for it to complete``, ``Failed to synchronize transfer end event; skipping %d remaining
  transfers``, ``Exception in %r transfer %d``/``Failed to submit %r transfer %d`` (0.11-0.24), ``agent.transfer
  failed for job %d``, ``transfer failed job=%d state=%s``, ``I/O failed for job %d``, ``Job %s block I/O
  failed``, ``batch_lookup failed on tier %s for %d keys``, the tier-poll thread's ``KV offload tier-poll round
  failed``, ``... has failed %d consecutive rounds (%.0fs)``, ``... backing off to %.1fs after %.0fs of
  consecutive failures``, ``... stopping after %.0fs of consecutive failures`` and its stall ``... has not
  acquired the manager lock for %.0fs``, a drain that hangs ``...drain_jobs: still draining after 5s``, the
  P2P tier's ``P2P %s: peer %s down`` (or reaped, or without a session), ``P2PSession %s: handshake timed out
  after %ds``, ``P2PSession %s: ... timed out``, its transfers stuck after a peer was reaped or an abort,
  ``KV offload load|store job %d failed`` (0.34), the object-store tier's per-job NIXL set-up failing. (``Request %s: cannot store ...`` begins with a request's id: an echo record, read as none.)

- Other connectors (decisions.yaml's "KV connectors' other transfer, handshake, notification and store
  failures"): NIXL's push mode (``Declining expired remote read``, ``Unrecognized request %s notif``,
  ``_do_start_push_kv for %s took %.1fms (slow NIXL submission)``...), Mooncake's sender worker, expired
  requests and store worker (``Failed to get %d Mooncake keys from sub-batch``, ``Boundary-state put failed
  ... %d/%d keys failed``...), MoRIIO (``RDMA transfer failed for request``, ``RDMA read TIMED OUT for req %s
  after %.1fs``, ``Reaped %d deferred sends ...``, ``Eager MoRIIO handshake failed``...), P2P NCCL's
  ``Send Tensor, Peer Out Of Memory/Threshold`` (0.9-0.23), V0's simple connector and PyNccl pipe, LMCache's
  multiprocess adapter (``Something went wrong when processing the retrieve request``), hf3fs's load and
  save workers, UMBP's store (0.34) and any connector's ``%s circuit breaker opened after %d consecutive
  failures``. A wording any component could print (``Transfer %s failed: %s``, ``Load worker error: %s``)
  is read only from its connector's file (the logger's stem).

- The encoder-cache (EC) connectors (``ec_transfer/ec_connector/**``, 0.30+: encoder outputs moved between
  servers): their control channel (``ec: router recv failed``...), NIXL reads that failed, timed out or were
  quarantined, a request failed for want of its remote encoding, Mooncake's pushes, waits and embedding
  store (``EC Mooncake waited %.1fs for a push of mm_hash=%s ... that never arrived``).

Events: ``kv_connector_failure`` {connector: nixl|mooncake|moriio|p2p_nccl|simple|lmcache|hf3fs|umbp (absent
for a circuit breaker, which names no connector), reason: transfer|handshake|timeout|expired|store|sender_exit|
unavailable|notify|slow|buffer_full|circuit_open, and the numbers a line holds}; ``kv_offload_failure`` {reason: transfer|io|lookup|
tier_poll_failed|tier_poll_stopped|tier_poll_stall|stuck|peer_down|peer_timeout, direction where logged,
seconds/transfers/keys where logged}; ``ec_connector_failure`` {connector: nixl|mooncake, reason: control|
transfer|missing|timeout|handshake|notify|store, seconds where logged}. Never a request's id or a peer's address.
"""

from __future__ import annotations

import re

from exporter.framing.frame import Frame
from exporter.parsers.base import EXCEPTION_P, PROBLEM_LEVELS, Parser, lazy_compile, logger_stem, where
from exporter.parsers.events import Event

_N = r"(\d+)"
_F = r"(\d+(?:\.\d+)?)"

# (pattern at the message's start, connector, reason, names of the pattern's groups that are numbers[, the
# logger file's stem it must begin with, for a wording any component could print])
_CONNECTOR = (
    (r"NIXL transfer failure: ", "nixl", "transfer", ()),
    (r"NIXL transfer (?:failed|exception|setup/initiation failed) for request ", "nixl", "transfer", ()),
    (r"Handshake failed for request |Handshake with \S+ failed|Failed handshake to D ", "nixl", "handshake", ()),
    (r"NIXL send_notif failed for request ", "nixl", "transfer", ()),
    (rf"NixlPushConnector: registration for request .* timed out after {_F}s", "nixl", "timeout", ("seconds",)),
    (r"Potentially invalid KV blocks for unrecognized request ", "nixl", "expired", ()),
    (rf"Releasing expired KV blocks for request .* which were retrieved by {_N} ", "nixl", "expired", ("workers",)),
    (r"NIXL is not available$", "nixl", "unavailable", ()),
    (r"Declining expired remote read for |Unrecognized request \S+ notif \(may have expired\)", "nixl", "expired", ()),
    (r"Failed to decode PUSH_REG notification payload", "nixl", "notify", ()),
    (rf"_do_start_push_kv for .* took {_F}ms \(slow NIXL submission\)", "nixl", "slow", ("ms",)),
    (r"nixl-push-writer error", "nixl", "transfer", ()),
    (r"Error happens during tran(?:s)?fer(?:r)?ing kvcache for ", "mooncake", "transfer", ()),
    (r"pulling kv_caches for .* failed: ", "mooncake", "transfer", ()),
    (rf"Sending to \S+ failed \(ret=[^)]*\) after .* \({_N} descriptors, {_N} bytes\)", "mooncake", "transfer",
     ("descriptors", "bytes")),
    (r"Error processing Mooncake xfer request: ", "mooncake", "transfer", ()),
    (r"Error in Mooncake sender thread: .*\. Exiting thread\.$", "mooncake", "sender_exit", ()),
    (r"Error in _sender_worker: ", "mooncake", "transfer", ()),
    (r"Mooncake(?:Agent|Xfer)Metadata transfer failed for |Error processing Mooncake handshake: ", "mooncake",
     "handshake", ()),
    (r"Failed to connect to bootstrap server |Error registering \S+ with bootstrap server|Failed to find remote "
     r"engine_id |Bootstrap (?:query to \S+ failed|registration attempt \d+/\d+ for \S+ failed)", "mooncake",
     "handshake", ()),
    (rf"Skipping KV lease renewal for {_N} requests: remote engine_id \S+ not found", "mooncake", "handshake",
     ("requests",)),
    (rf"req \S+: KV group count mismatch: local={_N}, remote={_N}", "mooncake", "handshake", ("local", "remote")),
    (r"Timeout waiting for P side ready: ", "mooncake", "timeout", ()),
    (r"KV lease of request .* expired before the decoder pulled it", "mooncake", "expired", ()),
    (r"Request .* expired before sending on P side|Requests .* were pulled after their KV expired on P side|"
     r"Request .* not found in reqs_need_send$", "mooncake", "expired", ()),
    (rf"Request .* timed out after {_N} seconds without being sent", "mooncake", "expired", ("seconds",)),
    (r"Transfer Return Error$|Failed to receive ACK from the receiver$|Allocation Return Error$", "mooncake",
     "transfer", ()),
    (rf"Failed to (?:get value from|put value into) Mooncake Store: |(?:Async )?Mooncake lookup failed for |"
     rf"Failed to put key |batch_put failed: {_N}/\d+ keys failed", "mooncake", "store", ("keys",)),
    (rf"(?:Boundary-state|Partial-tail) put failed for request .*: {_N}/\d+ keys failed", "mooncake", "store",
     ("keys",)),
    (rf"Failed to (?:check|put) (?:boundary-state|partial-tail) keys for request |Failed to get {_N} Mooncake keys "
     rf"from sub-batch|Failed to get Mooncake sub-batch |Failed to lease a Mooncake lookup hit|Mooncake "
     rf"(?:reset_store RPC|remove_all) failed|Mooncake store reset timed out|Remote connection failed in lookup: |"
     rf"Error in \S+ \(req=", "mooncake", "store", ("keys",)),
    # V0's connectors: Mooncake's store connector and the simple connector (its PyNccl pipe) print the same words
    (r"\[rank\d+\]: Failed to receive all KVs and hidden states, redo model forwarding", "by_logger", "transfer", ()),
    (r"Encountering exception in KV receiving thread|\[rank\d+\]: Exception when trying to send ", "simple",
     "transfer", ()),
    # MoRIIO (AMD's RDMA connector, 0.14+)
    (r"Eager MoRIIO handshake failed for |MoRIIO discovery heartbeat send failed", "moriio", "handshake", ()),
    (r"MoRIIO READ barrier failed |MoRIIO hybrid READ failed |RDMA transfer failed for request |"
     r"(?:Deferred write|Write) task failed for request ", "moriio", "transfer", ()),
    (rf"RDMA read TIMED OUT for req .* after {_F}s", "moriio", "timeout", ("seconds",)),
    (rf"Deferred write task for request .* timed out after {_F}s", "moriio", "timeout", ("seconds",)),
    (r"MoRIIO READ barrier timed out |MoRIIO READ send queue stayed full past transfer_timeout|Timed out waiting "
     r"for (?:load_ready_flag|write_ready_flags)\[", "moriio", "timeout", ()),
    (rf"Deferred write task for request .* expired after {_F}s", "moriio", "expired", ("seconds",)),
    (r"Could not find \S+ +in transfer_id_to_request_id ?lookup table", "moriio", "expired", ()),
    (rf"Reaped {_N} deferred sends with no finished_sending notification after {_F}s", "moriio", "notify",
     ("sends", "seconds")),
    (r"Failed to send error notification for request |Failed to notify decode DP rank \d+ that transfer ",
     "moriio", "notify", ()),
    (r"Failed to send notification to |Error processing message: ", "moriio", "notify", (), "moriio"),
    (r"Transfer \S+ failed: |Transfer failed: .*, Code: ", "moriio", "transfer", (), "moriio"),
    # P2P NCCL (0.9-0.23): a peer's buffer full, the tensor sent or kept elsewhere
    (rf"\U0001f534Send Tensor, Peer Out Of Memory/Threshold, .*size:{_F}GB", "p2p_nccl", "buffer_full", ("gb",)),
    (r"\U0001f534\[PUT\]Recv Tensor, Out Of (?:Memory|Threshold), ", "p2p_nccl", "buffer_full", ()),
    # LMCache's multiprocess adapter (vLLM's side of LMCache's server), hf3fs, UMBP (0.34)
    (r"Something went wrong when processing the (?:retrieve|store) request ", "lmcache", "transfer", ()),
    (r"(?:Load|Save) worker error: ", "hf3fs", "transfer", (), "hf3fs"),
    (r"Error calculating matches for request |Confirm write for keys failed: |Failed to POST to \S+ after retries",
     "hf3fs", "store", (), "hf3fs"),
    (r"UMBP \S+ publish failed: |UMBP standalone \S+ against \S+ failed; treating as a miss|UMBP standalone clear "
     r"at \S+ failed", "umbp", "store", ()),
    # any connector's circuit breaker (0.34): the failures it counted were logged one by one
    (rf"\S+ circuit breaker opened after {_N} consecutive failures; skipping requests for {_F} seconds", None,
     "circuit_open", ("failures", "seconds")),
)
_OFFLOAD = (
    (r"KV offload (GPU->CPU|CPU->GPU) transfer failed for job \d+", "transfer", ("direction",)),
    (r"KV offload transfer for job \d+ failed while waiting", "transfer", ()),
    (rf"KV offload (load|store) job \d+ failed; ", "transfer", ("direction",)),
    (rf"Failed to synchronize transfer end event; skipping {_N} remaining transfers", "transfer", ("transfers",)),
    (r"(?:Exception in|Failed to submit) (.+?) transfer \d+", "transfer", ("kind",)),
    (r"agent\.transfer failed for job |transfer failed job=\d+ state=", "transfer", ()),
    (r"(?:make_prepped_xfer|prep_xfer_dlist \(OBJ\)|register_memory \(OBJ\)) failed for job \d+$|KVCR source "
     r"acquisition failed", "transfer", ()),
    (r"NixlTransport \S+: (?:check_xfer_state failed for transfer_id=|write_blocks NO REMOTE DLIST for peer=|"
     r"write_blocks failed for peer=)", "transfer", ()),
    (r"P2PSession \S+: (?:transport reported (?:done|failed) for unknown transfer_id=|write_blocks failed for |"
     r"fetch .* have no pinned supply; failing fetch)", "transfer", ()),
    (r"I/O failed for job |(?:FileSystemTierManagerPython: job|Job) \S+ block I/O failed", "io", ()),
    (rf"batch_lookup failed on tier \S+ for {_N} keys", "lookup", ("keys",)),
    (r"lookup failed for key ", "lookup", ()),
    (r"KV offload tier-poll round failed", "tier_poll_failed", ()),
    (rf"KV offload tier-poll thread has failed {_N} consecutive rounds \({_F}s\)", "tier_poll_failed",
     ("rounds", "seconds")),
    (rf"KV offload tier-poll thread backing off to [\d.]+s after {_F}s of consecutive failures", "tier_poll_failed",
     ("seconds",)),
    (rf"KV offload tier-poll thread stopping after {_F}s of consecutive failures", "tier_poll_stopped", ("seconds",)),
    (rf"KV offload tier-poll thread has not acquired the manager lock for {_F}s", "tier_poll_stall", ("seconds",)),
    (r"\w+SecondaryTierManager\.drain_jobs: still draining after 5s", "stuck", ()),
    (rf"P2P \S+: {_N} transfers of reaped peers still running after {_F}s", "stuck", ("transfers", "seconds")),
    (rf"P2PSession \S+: abort of .* still waiting after {_F}s for {_N} transfers", "stuck", ("seconds", "transfers")),
    (r"P2P \S+: peer \S+ down", "peer_down", ()),
    (rf"P2P \S+: peer \S+ reaped with {_N} transfers still running", "peer_down", ("transfers",)),
    (r"P2P \S+: (?:failed to open connection to |submit_load job_id=\d+ NO SESSION for peer=|submit_store for "
     r"reaped )", "peer_down", ()),
    (r"P2PSession \S+: (?:peer registration failed|protocol error: |send of .* failed .*marking connection dead)",
     "peer_down", ()),
    (rf"P2P \S+: unbound store .* timed out after {_F}s without a fetch", "peer_timeout", ("seconds",)),
    (rf"P2PSession \S+: handshake timed out after {_N}s", "peer_timeout", ("seconds",)),
    (r"P2PSession \S+: .* timed out", "peer_timeout", ()),
)
# The encoder-cache (EC) connectors of encoder disaggregation (0.30+: encoder outputs moved from an encoder
# server to the one that prefills): (pattern, connector, reason, numbers[, the logger stem it must begin with])
_EC = (
    (r"ec: (?:DEALER recv|monitor poll|router poller|router recv|router send) failed", "nixl", "control", ()),
    (r"EC consumer: failed to start NIXL xfer |EC Connector: check_xfer_state failed for ", "nixl", "transfer", ()),
    (r"EC consumer: request .* needs remote encoding .*; failing the request", "nixl", "missing", ()),
    (r"EC Connector: (?:READ for|quarantined) mm_hash=\S+ from \S+ timed out", "nixl", "timeout", ()),
    (r"EC Connector: failed to register peer ", "nixl", "handshake", ()),
    (r"EC Connector: get_new_notifs failed", "nixl", "notify", ()),
    (r"EC Mooncake event channel failed", "mooncake", "control", ()),
    (r"EC Mooncake event-channel discovery for \S+ failed", "mooncake", "handshake", ()),
    (rf"EC Mooncake waited {_F}s for a push of ", "mooncake", "timeout", ("seconds",)),
    (r"EC Mooncake (?:push batch|pushed load) failed", "mooncake", "transfer", ()),
    (r"EC Mooncake async save failed |Mooncake embedding Store (?:GET|lookup) failed", "mooncake", "store", ()),
    (r"Store PUT failed for ", "mooncake", "store", (), "backend"),
)
_CONNECTOR_RX = tuple((lazy_compile(e[0]), *e[1:4], e[4] if len(e) > 4 else None) for e in _CONNECTOR)
_EC_RX = tuple((lazy_compile(e[0]), *e[1:4], e[4] if len(e) > 4 else None) for e in _EC)
_OFFLOAD_RX = tuple((lazy_compile(p), r, names) for p, r, names in _OFFLOAD)
_DIRECTIONS = {"GPU->CPU": "store", "CPU->GPU": "load", "store": "store", "load": "load"}


def _numbers(m: re.Match, names: tuple[str, ...]) -> dict:
    out: dict = {}
    for name, value in zip(names, m.groups()):
        if value is None:
            continue
        if name == "direction":
            out[name] = _DIRECTIONS[value]
        elif name == "kind":  # the transfer type's repr, ('GPU', 'CPU') for a store
            gpu, cpu = value.find("GPU"), value.find("CPU")
            if gpu >= 0 and cpu >= 0:
                out["direction"] = "store" if gpu < cpu else "load"
        elif name == "ms":
            out["seconds"] = float(value) / 1000
        elif name == "gb":
            out["bytes"] = int(float(value) * 2**30)
        else:
            out[name] = float(value) if name == "seconds" else int(value)
    return out


def _messages(frame: Frame) -> tuple[str, ...]:
    """The message, and it without an exception's type in front (a bare Mooncake line may carry one;
    "FileSystemTierManagerPython: job ..." reads like one and is not)."""
    msg = frame.message
    m = _EXC.match(msg)
    return (msg, msg[m.end():]) if m and m.end() else (msg,)


_EXC = lazy_compile(EXCEPTION_P)


def _connector(frame: Frame, table=_CONNECTOR_RX, kind: str = "kv_connector_failure") -> list[Event] | None:
    for msg in _messages(frame):
        for rx, connector, reason, names, stem in table:
            m = rx.match(msg)
            if m:
                if stem is not None or connector == "by_logger":
                    file = logger_stem(frame.logger) if frame.logger else ""
                    if stem is not None and not file.startswith(stem):
                        return None  # a wording any component could print, from another file
                    if connector == "by_logger":
                        connector = "mooncake" if file.startswith("mooncake") else "simple"
                fields = {"reason": reason, **_numbers(m, names)}
                if connector is not None:
                    fields["connector"] = connector
                return [Event(kind, fields)]
    return None


def _ec(frame: Frame) -> list[Event] | None:
    return _connector(frame, _EC_RX, "ec_connector_failure")


def _offload(frame: Frame) -> list[Event] | None:
    for msg in _messages(frame):
        for rx, reason, names in _OFFLOAD_RX:
            m = rx.match(msg)
            if m:
                return [Event("kv_offload_failure", {"reason": reason, **_numbers(m, names)})]
    return None


# Where they are printed (the trust boundary): WARNING or worse records of the connectors and tiers (and
# Mooncake's own bare lines), their words first. The needles are the failure words every one of them holds.
KV_CONNECTOR_FAILURE = Parser(
    "kv_connector_failure",
    ("NIXL ", "NixlPush", "andshake", "Mooncake", "kvcache for", "kv_caches for", "Sending to ", "ootstrap", "P side",
     "KV lease", "Return Error", "ACK from", "KV blocks for", "Failed to put key", "batch_put failed", "remote read",
     "PUSH_REG", "notif", "push_kv", "push-writer", "_sender_worker", "reqs_need_send", "without being sent",
     "KV group count", "put failed for request", " keys for request", "(req=", "failed in lookup", "KVs and hidden",
     "KV receiving", "trying to send", "MoRIIO", "RDMA ", "write task", "Write task", "Timed out waiting for ",
     "transfer_id_to_request_id", "processing message", "Transfer ", "Out Of ", "went wrong when processing",
     "worker error", "matches for request", "Confirm write", "Failed to POST", "UMBP ", "circuit breaker"),
    _connector,
    where(PROBLEM_LEVELS, start=EXCEPTION_P + "(?:" + "|".join(e[0] for e in _CONNECTOR) + ")"),
)
KV_OFFLOAD_FAILURE = Parser(
    "kv_offload_failure",
    ("KV offload", "transfer end event", " transfer ", "transfer failed", "I/O failed", "batch_lookup failed",
     "drain_jobs", "P2P", "failed for job", "KVCR", "NixlTransport", "lookup failed for key"),
    _offload,
    where(PROBLEM_LEVELS, start=EXCEPTION_P + "(?:" + "|".join(p for p, _, _ in _OFFLOAD) + ")"),
)
EC_CONNECTOR_FAILURE = Parser(
    "ec_connector_failure",
    ("ec: ", "EC ", "Mooncake embedding", "Store PUT failed"),
    _ec,
    where(PROBLEM_LEVELS, start=EXCEPTION_P + "(?:" + "|".join(e[0] for e in _EC) + ")"),
)
PARSERS = (KV_CONNECTOR_FAILURE, KV_OFFLOAD_FAILURE, EC_CONNECTOR_FAILURE)
KINDS = ("kv_connector_failure", "kv_offload_failure", "ec_connector_failure")
