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
  P2P tier's ``P2P %s: peer %s down``, ``P2PSession %s: handshake timed out after %ds``, ``P2PSession %s: ...
  timed out``. (``Request %s: cannot store ...`` begins with a request's id: an echo record, read as none.)

Events: ``kv_connector_failure`` {connector: nixl|mooncake, reason: transfer|handshake|timeout|expired|store|
sender_exit|unavailable, and the numbers a line holds}; ``kv_offload_failure`` {reason: transfer|io|lookup|
tier_poll_failed|tier_poll_stopped|tier_poll_stall|stuck|peer_down|peer_timeout, direction where logged,
seconds/transfers/keys where logged}. Never a request's id or a peer's address.
"""

from __future__ import annotations

import re

from exporter.framing.frame import Frame
from exporter.parsers.base import EXCEPTION_P, PROBLEM_LEVELS, Parser, where
from exporter.parsers.events import Event

_N = r"(\d+)"
_F = r"(\d+(?:\.\d+)?)"

# (pattern at the message's start, connector, reason, names of the pattern's groups that are numbers)
_CONNECTOR = (
    (r"NIXL transfer failure: ", "nixl", "transfer", ()),
    (r"NIXL transfer (?:failed|exception|setup/initiation failed) for request ", "nixl", "transfer", ()),
    (r"Handshake failed for request |Handshake with \S+ failed|Failed handshake to D ", "nixl", "handshake", ()),
    (r"NIXL send_notif failed for request ", "nixl", "transfer", ()),
    (rf"NixlPushConnector: registration for request .* timed out after {_F}s", "nixl", "timeout", ("seconds",)),
    (r"Potentially invalid KV blocks for unrecognized request ", "nixl", "expired", ()),
    (rf"Releasing expired KV blocks for request .* which were retrieved by {_N} ", "nixl", "expired", ("workers",)),
    (r"NIXL is not available$", "nixl", "unavailable", ()),
    (r"Error happens during tran(?:s)?fer(?:r)?ing kvcache for ", "mooncake", "transfer", ()),
    (r"pulling kv_caches for .* failed: ", "mooncake", "transfer", ()),
    (rf"Sending to \S+ failed \(ret=[^)]*\) after .* \({_N} descriptors, {_N} bytes\)", "mooncake", "transfer",
     ("descriptors", "bytes")),
    (r"Error processing Mooncake xfer request: ", "mooncake", "transfer", ()),
    (r"Error in Mooncake sender thread: .*\. Exiting thread\.$", "mooncake", "sender_exit", ()),
    (r"Mooncake(?:Agent|Xfer)Metadata transfer failed for |Error processing Mooncake handshake: ", "mooncake",
     "handshake", ()),
    (r"Failed to connect to bootstrap server |Error registering \S+ with bootstrap server|Failed to find remote "
     r"engine_id |Bootstrap (?:query to \S+ failed|registration attempt \d+/\d+ for \S+ failed)", "mooncake",
     "handshake", ()),
    (r"Timeout waiting for P side ready: ", "mooncake", "timeout", ()),
    (r"KV lease of request .* expired before the decoder pulled it", "mooncake", "expired", ()),
    (r"Transfer Return Error$|Failed to receive ACK from the receiver$", "mooncake", "transfer", ()),
    (rf"Failed to (?:get value from|put value into) Mooncake Store: |(?:Async )?Mooncake lookup failed for |"
     rf"Failed to put key |batch_put failed: {_N}/\d+ keys failed", "mooncake", "store", ("keys",)),
)
_OFFLOAD = (
    (r"KV offload (GPU->CPU|CPU->GPU) transfer failed for job \d+", "transfer", ("direction",)),
    (r"KV offload transfer for job \d+ failed while waiting", "transfer", ()),
    (rf"Failed to synchronize transfer end event; skipping {_N} remaining transfers", "transfer", ("transfers",)),
    (r"(?:Exception in|Failed to submit) (.+?) transfer \d+", "transfer", ("kind",)),
    (r"agent\.transfer failed for job |transfer failed job=\d+ state=", "transfer", ()),
    (r"I/O failed for job |(?:FileSystemTierManagerPython: job|Job) \S+ block I/O failed", "io", ()),
    (rf"batch_lookup failed on tier \S+ for {_N} keys", "lookup", ("keys",)),
    (r"KV offload tier-poll round failed", "tier_poll_failed", ()),
    (rf"KV offload tier-poll thread has failed {_N} consecutive rounds \({_F}s\)", "tier_poll_failed",
     ("rounds", "seconds")),
    (rf"KV offload tier-poll thread backing off to [\d.]+s after {_F}s of consecutive failures", "tier_poll_failed",
     ("seconds",)),
    (rf"KV offload tier-poll thread stopping after {_F}s of consecutive failures", "tier_poll_stopped", ("seconds",)),
    (rf"KV offload tier-poll thread has not acquired the manager lock for {_F}s", "tier_poll_stall", ("seconds",)),
    (r"\w+SecondaryTierManager\.drain_jobs: still draining after 5s", "stuck", ()),
    (r"P2P \S+: peer \S+ down", "peer_down", ()),
    (rf"P2PSession \S+: handshake timed out after {_N}s", "peer_timeout", ("seconds",)),
    (r"P2PSession \S+: .* timed out", "peer_timeout", ()),
)
_CONNECTOR_RX = tuple((re.compile(p), c, r, names) for p, c, r, names in _CONNECTOR)
_OFFLOAD_RX = tuple((re.compile(p), r, names) for p, r, names in _OFFLOAD)
_DIRECTIONS = {"GPU->CPU": "store", "CPU->GPU": "load"}


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
        else:
            out[name] = float(value) if name == "seconds" else int(value)
    return out


def _messages(frame: Frame) -> tuple[str, ...]:
    """The message, and it without an exception's type in front (a bare Mooncake line may carry one;
    "FileSystemTierManagerPython: job ..." reads like one and is not)."""
    msg = frame.message
    m = _EXC.match(msg)
    return (msg, msg[m.end():]) if m and m.end() else (msg,)


_EXC = re.compile(EXCEPTION_P)


def _connector(frame: Frame) -> list[Event] | None:
    for msg in _messages(frame):
        for rx, connector, reason, names in _CONNECTOR_RX:
            m = rx.match(msg)
            if m:
                return [Event("kv_connector_failure", {"connector": connector, "reason": reason, **_numbers(m, names)})]
    return None


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
     "KV lease", "Return Error", "ACK from", "KV blocks for", "Failed to put key", "batch_put failed"),
    _connector,
    where(PROBLEM_LEVELS, start=EXCEPTION_P + "(?:" + "|".join(p for p, _, _, _ in _CONNECTOR) + ")"),
)
KV_OFFLOAD_FAILURE = Parser(
    "kv_offload_failure",
    ("KV offload", "transfer end event", " transfer ", "transfer failed", "I/O failed", "batch_lookup failed",
     "drain_jobs", "P2P"),
    _offload,
    where(PROBLEM_LEVELS, start=EXCEPTION_P + "(?:" + "|".join(p for p, _, _ in _OFFLOAD) + ")"),
)
PARSERS = (KV_CONNECTOR_FAILURE, KV_OFFLOAD_FAILURE)
KINDS = ("kv_connector_failure", "kv_offload_failure")
