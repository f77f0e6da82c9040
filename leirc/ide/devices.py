"""Why a device is not used, found in seconds, without TVM (the editor's process never
imports it).

"Run on GPU" through a TVM RPC tracker used to find out that the tracker was not there
only when the engine's request for a server gave up (64 s later, as "no RPC server for
key" even when the connection was refused). :func:`probe_tracker` speaks the tracker's
own protocol on a plain socket (magic, then ``[SUMMARY]`` as length-prefixed JSON, as
``tvm.rpc.base`` does) under one deadline and tells apart: a malformed address, a name
that does not resolve, a refused connection (immediate), no answer, something that is not
a tracker, a key the tracker does not serve (with the keys it does), and a key whose
servers are all busy.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Optional

#: ``tvm.rpc.base.RPC_TRACKER_MAGIC`` and ``TrackerCode.SUMMARY`` / ``SUCCESS``
TRACKER_MAGIC = 0x2F271
SUMMARY, SUCCESS = 6, 0


@dataclass(frozen=True)
class TrackerProbe:
    """``kind``: ``ok``, ``bad-address``, ``unresolved``, ``refused``, ``timeout``,
    ``unreachable``, ``not-a-tracker``, ``unknown-key``, ``busy``; ``message`` says it whole
    with the setting to change; ``keys``: what the tracker serves (key -> free servers)."""

    kind: str
    message: str
    keys: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); ValueError with a message otherwise (as the engine's
    RPC layer reads it, without importing it into the editor's process)."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a tracker address: {text!r} (expected HOST:PORT, e.g. 127.0.0.1:9190)")
    return host, int(port)


def probe_tracker(address: Optional[str], key: Optional[str], timeout: float = 4.0) -> TrackerProbe:
    """Ask the tracker at ``address`` (``HOST:PORT``) whether it serves ``key``; never
    raises, never takes longer than ``timeout`` seconds (plus name resolution)."""
    host, sep, port = str(address or "").rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return TrackerProbe("bad-address", f"leir.rpc.tracker is {address!r}, not HOST:PORT (e.g. 127.0.0.1:9190)")
    if not key:
        return TrackerProbe("bad-address", "leir.rpc.tracker is set but leir.rpc.key is not: the tracker hands out "
                                           "servers by key")
    where = f"{host}:{port}"
    deadline = time.monotonic() + timeout
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except OSError as e:
        return TrackerProbe("unresolved", f"the RPC tracker host '{host}' does not resolve ({e}): check leir.rpc.tracker")
    last: Optional[OSError] = None
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                s.connect(addr)
                s.sendall(struct.pack("<i", TRACKER_MAGIC))
                magic = _recv(s, 4, deadline)
                if magic is None or struct.unpack("<i", magic)[0] != TRACKER_MAGIC:
                    return TrackerProbe("not-a-tracker", f"{where} answers but is not a TVM RPC tracker: check "
                                                         "leir.rpc.tracker (the tracker's port, not a server's)")
                body = json.dumps([SUMMARY]).encode()
                s.sendall(struct.pack("<i", len(body)) + body)
                size = _recv(s, 4, deadline)
                data = _recv(s, struct.unpack("<i", size)[0], deadline) if size else None
                reply = json.loads(data.decode()) if data else None
                if not isinstance(reply, list) or len(reply) < 2 or reply[0] != SUCCESS:
                    return TrackerProbe("not-a-tracker", f"the tracker at {where} gave no summary: {reply!r}")
                return _judge(where, key, reply[1])
        except ConnectionRefusedError as e:
            return TrackerProbe("refused", f"no RPC tracker is listening at {where} (connection refused: {e.strerror}): "
                                           "start it (python -m tvm.exec.rpc_tracker) or fix leir.rpc.tracker")
        except socket.timeout:
            return TrackerProbe("timeout", f"the RPC tracker at {where} did not answer within {timeout:g} s: check "
                                           "leir.rpc.tracker and the network")
        except (OSError, ValueError, struct.error) as e:
            last = e if isinstance(e, OSError) else OSError(str(e))
    return TrackerProbe("unreachable", f"the RPC tracker at {where} cannot be reached ({last}): check leir.rpc.tracker")


def _recv(s: socket.socket, n: int, deadline: float) -> Optional[bytes]:
    out = b""
    while len(out) < n:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        chunk = s.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return out


def _judge(where: str, key: str, summary) -> TrackerProbe:
    queue = summary.get("queue_info", {}) if isinstance(summary, dict) else {}
    keys = {k: int(v.get("free", 0)) for k, v in queue.items() if isinstance(v, dict)}
    if key not in keys:
        served = ", ".join(sorted(keys)) or "none"
        return TrackerProbe("unknown-key", f"the RPC tracker at {where} has no device for key '{key}' (keys it "
                                           f"serves: {served}): set leir.rpc.key", keys)
    if keys[key] < 1:
        return TrackerProbe("busy", f"every device for key '{key}' at {where} is busy (0 free): a run waits for one",
                            keys)
    return TrackerProbe("ok", f"{keys[key]} free device(s) for key '{key}' at {where}", keys)
