"""The target fingerprint of this node: what a timing must match to be comparable.

Two nodes time a kernel the same way only when they run the same code on the same kind of
core, so the fingerprint of ``llvm`` is the host CPU (model name and feature flags, what TVM's
``-mcpu`` and the vector width are derived from) and of any other target its name plus the
host. ``leirc.target`` (the project's ``Target`` value object) computes it; if it cannot
describe the host, the same facts are hashed here from /proc/cpuinfo.
"""

from __future__ import annotations

import functools
import hashlib
import platform

#: the prefix of the Ray custom resource a timing node offers for its fingerprint
RESOURCE_PREFIX = "leirc-timer:"
#: target specs that mean "this host's CPU"
_HOST_SPECS = ("llvm", "host", "")


def _cpuinfo() -> tuple[str, str]:
    """(model name, sorted feature flags) of the first processor in /proc/cpuinfo."""
    model, flags = "", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key == "model name" and not model:
                    model = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = " ".join(sorted(value.split()))
                if model and flags:
                    break
    except OSError:  # not Linux: the platform's own description is the best there is
        model = platform.processor() or platform.machine()
    return model, flags


def _host_fingerprint(target: str) -> str:
    """``leirc.target``'s host fingerprint, combined with ``target`` unless that names the host."""
    from ..target import target_of

    fp = target_of("llvm").fingerprint
    return fp if target.strip() in _HOST_SPECS else hashlib.sha256(f"{target}\0{fp}".encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def target_fingerprint(target: str = "llvm") -> str:
    """16 hex digits naming (``target``, this host's CPU); equal on nodes whose timings of
    ``target`` code are comparable. ``leirc.target`` decides; a host it cannot describe
    (it raised) falls back to a hash of the same facts read here."""
    try:
        return _host_fingerprint(target)
    except Exception:  # noqa: BLE001 - an unreadable host description still has a fingerprint
        model, flags = _cpuinfo()
        return hashlib.sha256("\0".join((target, platform.machine(), model, flags)).encode()).hexdigest()[:16]


def timer_resource(fingerprint: str) -> str:
    """The Ray custom resource of nodes that may time for ``fingerprint`` (one unit per node:
    one timing at a time there)."""
    return RESOURCE_PREFIX + fingerprint


def node_resources(target: str = "llvm", slots: int = 1) -> dict:
    """What ``ray start --resources`` should offer on this node for ``target``: ``slots``
    timings at once (1, the default: a timing never shares the machine with another)."""
    return {timer_resource(target_fingerprint(target)): int(slots)}


__all__ = ["target_fingerprint", "timer_resource", "node_resources", "RESOURCE_PREFIX"]
