"""The target: what kind of machine a kernel is built for and what that machine grants.

One value object, :class:`Target`, read by the lowering (which turns it into TVM's target),
``-O2``'s tile choice, the search's cost model, the evaluation caches (through
:attr:`Target.fingerprint`) and ``leirc target``. Nothing else compares target strings.

Why not the CPU's *name*: LLVM's host CPU name (``znver4``, ``sapphirerapids``) implies an
instruction set, but a hypervisor may mask part of it (a VM on a Zen 4 host that hides
AVX-512 is common), and a kernel built for the name then dies with SIGILL. So a host target
carries the instruction-set features **the OS grants** -- the ``flags`` line of
``/proc/cpuinfo``, which Linux fills from CPUID and clears for state the kernel did not enable
in XCR0 (no ``avx512f`` flag without the opmask/ZMM state) -- and the lowering passes them to
LLVM as an explicit ``-mattr`` (``+`` for every granted feature of :data:`X86_FEATURES`, ``-``
for every other one), which overrides what the name implies.

Everything is read from text the caller may inject (``cpuinfo=``, ``sysfs=``,
``llvm_cpu=``), so a test can describe any host. This module imports nothing from TVM; the
LLVM CPU name of the host is resolved in :mod:`leirc.lower` when a kernel is lowered, and is
not part of the fingerprint (the OS's model name and flags identify the host).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

__all__ = ["Target", "TargetError", "X86_FEATURES", "parse_cpuinfo", "read_caches", "target_of", "KINDS"]

#: the kinds of target leirc builds for (``interp`` is the reference interpreter: no build)
KINDS = ("llvm", "cuda")

#: ``/proc/cpuinfo`` flag -> LLVM feature, for the x86 instruction-set extensions that decide
#: which instructions LLVM may emit. Only these are passed as ``-mattr``; LLVM's tuning
#: features (``fast-lzcnt``, ``macrofusion``...) still come from the CPU name.
X86_FEATURES: Mapping[str, str] = {
    "sse": "sse", "sse2": "sse2", "pni": "sse3", "ssse3": "ssse3", "sse4_1": "sse4.1", "sse4_2": "sse4.2",
    "sse4a": "sse4a", "avx": "avx", "avx2": "avx2", "fma": "fma", "fma4": "fma4", "f16c": "f16c",
    "bmi1": "bmi", "bmi2": "bmi2", "abm": "lzcnt", "popcnt": "popcnt", "movbe": "movbe", "adx": "adx",
    "aes": "aes", "pclmulqdq": "pclmul", "sha_ni": "sha", "rdrand": "rdrnd", "rdseed": "rdseed",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512vl": "avx512vl", "avx512ifma": "avx512ifma", "avx512vbmi": "avx512vbmi",
    "avx512_vbmi2": "avx512vbmi2", "avx512_vnni": "avx512vnni", "avx512_bitalg": "avx512bitalg",
    "avx512_vpopcntdq": "avx512vpopcntdq", "avx512_bf16": "avx512bf16", "avx512_fp16": "avx512fp16",
    "avx512_vp2intersect": "avx512vp2intersect", "avx_vnni": "avxvnni", "gfni": "gfni", "vaes": "vaes",
    "vpclmulqdq": "vpclmulqdq", "amx_tile": "amx-tile", "amx_int8": "amx-int8", "amx_bf16": "amx-bf16",
}

_CACHE_LEVELS = ("L1d", "L2", "L3")


class TargetError(ValueError):
    """A target spec leirc cannot use (the message says why and what is accepted)."""


def parse_cpuinfo(text: str) -> dict:
    """``{"flags": [...], "model": str, "vendor": str, "arch_features": [...]}`` from the text
    of ``/proc/cpuinfo`` (the first processor's block; every core of a VM reports the same)."""
    flags: list[str] = []
    model = vendor = ""
    arch_features: list[str] = []
    for line in text.splitlines():
        if ":" not in line:
            if flags and not line.strip():
                break  # end of the first processor's block
            continue
        key, _, val = line.partition(":")
        key = key.strip().lower()
        if key == "flags" and not flags:
            flags = val.split()
        elif key == "features" and not arch_features:  # aarch64
            arch_features = val.split()
        elif key == "model name" and not model:
            model = val.strip()
        elif key == "vendor_id" and not vendor:
            vendor = val.strip()
    return {"flags": flags, "model": model, "vendor": vendor, "arch_features": arch_features}


def _size(text: str) -> Optional[int]:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def read_caches(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> dict:
    """Data/unified cache sizes per level, ``{"L1d": bytes, "L2": bytes, "L3": bytes}``, as
    sysfs reports them for CPU 0 (a level sysfs does not show is absent)."""
    out: dict = {}
    try:
        entries = sorted(os.listdir(sysfs))
    except OSError:
        return out
    for e in entries:
        if not e.startswith("index"):
            continue
        d = os.path.join(sysfs, e)
        try:
            with open(os.path.join(d, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(d, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(d, "size")) as f:
                size = _size(f.read())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        name = "L1d" if level == 1 else f"L{level}"
        out[name] = size
    return out


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Target:
    """A build target (see the module docstring).

    ``kind``: ``llvm`` (this CPU or a named one) or ``cuda``. ``cpu``: an LLVM CPU name, or
    None for the host's (resolved at lowering). ``features``: the LLVM x86 features granted
    (None: not restricted, whatever ``cpu`` implies -- a named CPU, or a host whose
    architecture has no feature table here). ``mattr``: extra ``-mattr`` items the user
    gave. ``vector_bits``: the widest usable vector register; ``cores``: usable cores;
    ``caches``: bytes per level; ``model``: the OS's CPU model name; ``arch`` (CUDA): the
    SM architecture. ``why``: how each fact was found, for ``leirc target``."""

    kind: str = "llvm"
    cpu: Optional[str] = None
    features: Optional[tuple] = None
    mattr: tuple = ()
    triple: Optional[str] = None
    vector_bits: int = 128
    cores: int = 1
    caches: tuple = ()
    model: str = ""
    machine: str = ""
    arch: Optional[str] = None
    why: tuple = field(default=(), compare=False)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def host(cls, *, cpuinfo: Optional[str] = None, sysfs: Optional[str] = None, llvm_cpu: Optional[str] = None,
             cores: Optional[int] = None, machine: Optional[str] = None) -> "Target":
        """This machine (or the one ``cpuinfo`` text, a ``sysfs`` cache directory, an LLVM CPU
        name ``llvm_cpu`` and a core count describe)."""
        why = []
        if cpuinfo is None:
            try:
                with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                    cpuinfo = f.read()
                why.append("features: the flags of /proc/cpuinfo (what the OS grants)")
            except OSError:
                cpuinfo = ""
                why.append("features: /proc/cpuinfo unreadable, so LLVM's CPU name decides")
        else:
            why.append("features: the flags of the given cpuinfo text")
        info = parse_cpuinfo(cpuinfo)
        machine = machine or platform.machine() or "x86_64"
        flags = set(info["flags"])
        if machine in ("x86_64", "AMD64", "i686") and flags:
            features = tuple(sorted({v for k, v in X86_FEATURES.items() if k in flags}))
            bits = 512 if "avx512f" in flags else 256 if ("avx2" in flags or "avx" in flags) else 128
        else:
            features = None
            bits = 128  # NEON / SSE2 baseline
            if machine in ("x86_64", "AMD64", "i686"):
                why.append("no cpuinfo flags: the instruction set is what LLVM's CPU name implies")
        caches = read_caches(sysfs) if sysfs is not None else read_caches()
        if not caches:
            why.append("caches: not reported by sysfs")
        ncores = int(cores) if cores else _usable_cores()
        if llvm_cpu:
            why.append(f"cpu: {llvm_cpu} (given)")
        else:
            why.append("cpu: LLVM's name for this host, resolved when a kernel is lowered")
        return cls("llvm", cpu=llvm_cpu or None, features=features, vector_bits=bits, cores=ncores,
                   caches=tuple(sorted(caches.items(), key=lambda kv: _CACHE_LEVELS.index(kv[0])
                                       if kv[0] in _CACHE_LEVELS else 9)),
                   model=info["model"], machine=machine, why=tuple(why))

    @classmethod
    def parse(cls, spec) -> "Target":
        """A target from a spec: a :class:`Target`; ``"llvm"`` or ``"host"`` (this machine);
        ``"llvm -mcpu=NAME [-mattr=+a,-b] [-mtriple=T] [-num-cores=N]"`` (a named CPU: its
        instruction set is what LLVM's name implies, adjusted by ``-mattr``); ``"cuda
        [-arch=sm_90]"``; or the dict of :meth:`to_json`. Raises :class:`TargetError`."""
        if isinstance(spec, Target):
            return spec
        if isinstance(spec, dict):
            return cls.from_json(spec)
        words = shlex.split(str(spec or "llvm"))
        head, opts = words[0], words[1:]
        if head == "host":
            head = "llvm"
        if head not in KINDS:
            raise TargetError(f"unknown target '{head}' (use llvm, cuda, or 'llvm -mcpu=NAME -mattr=+f,-g')")
        kv = {}
        for o in opts:
            m = re.fullmatch(r"--?([a-z][a-z0-9-]*)=(.*)", o)
            if not m:
                raise TargetError(f"target option '{o}' is not of the form -key=value")
            kv[m.group(1)] = m.group(2)
        if head == "cuda":
            unknown = set(kv) - {"arch"}
            if unknown:
                raise TargetError(f"unknown cuda target option(s): {', '.join(sorted(unknown))} (known: -arch)")
            arch = kv.get("arch", "sm_90")
            if not re.fullmatch(r"(sm_)?\d+[a-z]?", arch):
                raise TargetError(f"-arch={arch}: not an SM architecture such as sm_90")
            return cls("cuda", arch=arch if arch.startswith("sm_") else f"sm_{arch}", vector_bits=32,
                       why=("cuda: -arch as given" if "arch" in kv else "cuda: default sm_90",))
        unknown = set(kv) - {"mcpu", "mattr", "mtriple", "num-cores"}
        if unknown:
            raise TargetError(f"unknown llvm target option(s): {', '.join(sorted(unknown))} "
                              "(known: -mcpu, -mattr, -mtriple, -num-cores)")
        t = cls.host()
        mattr = tuple(a for a in kv.get("mattr", "").split(",") if a)
        for a in mattr:
            if a[:1] not in "+-" or len(a) < 2:
                raise TargetError(f"-mattr item '{a}' must be +feature or -feature")
        changes: dict = {"mattr": mattr, "why": t.why}
        if "mcpu" in kv:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", kv["mcpu"]):
                raise TargetError(f"-mcpu={kv['mcpu']}: not a CPU name")
            # a named CPU: the user states the instruction set; the host's flags no longer apply
            changes.update(cpu=kv["mcpu"], features=None, model="",
                           why=t.why + (f"cpu: {kv['mcpu']} (given: its instruction set is what LLVM's name implies)",))
        if "mtriple" in kv:
            changes["triple"] = kv["mtriple"]
        if "num-cores" in kv:
            try:
                changes["cores"] = max(1, int(kv["num-cores"]))
            except ValueError:
                raise TargetError(f"-num-cores={kv['num-cores']}: not an integer") from None
        t = replace(t, **changes)
        return replace(t, vector_bits=t._bits_after_mattr(), features=t._features_after_mattr())

    def _features_after_mattr(self) -> Optional[tuple]:
        """The granted features once the user's ``-mattr`` is applied (removing ``avx512f``
        or ``avx`` removes what LLVM makes depend on it)."""
        if self.features is None:
            return None
        out = set(self.features)
        for a in self.mattr:
            name = a[1:]
            if a[0] == "+":
                out.add(name)
                continue
            out.discard(name)
            if name == "avx512f":
                out = {f for f in out if not f.startswith("avx512")}
            elif name == "avx":
                out = {f for f in out if not f.startswith("avx") and f not in ("fma", "f16c", "vaes", "vpclmulqdq")}
            elif name == "avx2":
                out = {f for f in out if not f.startswith(("avx512", "avx2", "avxvnni"))}
        return tuple(sorted(out))

    def _bits_after_mattr(self) -> int:
        bits = self.vector_bits
        for a in self.mattr:
            name = a[1:]
            if a[0] == "+" and name.startswith("avx512"):
                bits = max(bits, 512)
            elif a[0] == "+" and name in ("avx", "avx2"):
                bits = max(bits, 256)
            elif a[0] == "-" and name == "avx512f":
                bits = min(bits, 256)
            elif a[0] == "-" and name in ("avx", "avx2"):
                bits = min(bits, 128)
        return bits

    # -- what the rest of leirc reads ----------------------------------------------------
    def lanes(self, bits: int = 32) -> int:
        """Vector lanes of a ``bits``-wide element (f32 by default)."""
        return max(1, self.vector_bits // bits) if self.kind == "llvm" else 1

    def cache(self, level: str) -> Optional[int]:
        return dict(self.caches).get(level)

    @property
    def is_gpu(self) -> bool:
        return self.kind == "cuda"

    def llvm_mattr(self) -> list:
        """The ``-mattr`` list the lowering passes to LLVM: every known x86 feature granted
        (``+``) or not (``-``), then the user's own items (which win)."""
        out: list = []
        if self.kind == "llvm" and self.features is not None:
            granted = set(self.features)
            out = [("+" if f in granted else "-") + f for f in sorted(set(X86_FEATURES.values()))]
        user = {a[1:] for a in self.mattr}
        return [a for a in out if a[1:] not in user] + list(self.mattr)

    def spec(self) -> str:
        """The short spec that :meth:`parse` reads back (a host target is ``llvm``)."""
        if self.kind == "cuda":
            return f"cuda -arch={self.arch}"
        parts = ["llvm"]
        if self.cpu and self.features is None:
            parts.append(f"-mcpu={self.cpu}")
        if self.mattr:
            parts.append("-mattr=" + ",".join(self.mattr))
        if self.triple:
            parts.append(f"-mtriple={self.triple}")
        return " ".join(parts)

    def to_json(self) -> dict:
        return {"leirc_target": 1, "kind": self.kind, "cpu": self.cpu,
                "features": None if self.features is None else list(self.features), "mattr": list(self.mattr),
                "triple": self.triple, "vector_bits": self.vector_bits, "cores": self.cores,
                "caches": {k: v for k, v in self.caches}, "model": self.model, "machine": self.machine,
                "arch": self.arch, "fingerprint": self.fingerprint, "why": list(self.why)}

    @classmethod
    def from_json(cls, d: dict) -> "Target":
        if "leirc_target" not in d:
            raise TargetError("not a leirc target document (no 'leirc_target' key)")
        feats = d.get("features")
        return cls(d.get("kind", "llvm"), cpu=d.get("cpu"), features=None if feats is None else tuple(feats),
                   mattr=tuple(d.get("mattr") or ()), triple=d.get("triple"), vector_bits=int(d.get("vector_bits", 128)),
                   cores=int(d.get("cores", 1)), caches=tuple((d.get("caches") or {}).items()),
                   model=d.get("model", ""), machine=d.get("machine", ""), arch=d.get("arch"),
                   why=tuple(d.get("why") or ()))

    @property
    def fingerprint(self) -> str:
        """16 hex digits naming what decides a kernel's code and speed: kind, CPU model or
        name, granted features, user ``-mattr``, vector width, cores, caches (CUDA: the
        arch). Results stored under one fingerprint are not reused under another."""
        ident = {"kind": self.kind, "cpu": self.cpu, "model": self.model, "machine": self.machine,
                 "features": None if self.features is None else list(self.features), "mattr": list(self.mattr),
                 "triple": self.triple, "vector_bits": self.vector_bits, "cores": self.cores,
                 "caches": [list(c) for c in self.caches], "arch": self.arch}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    def __str__(self) -> str:
        return self.spec()


def target_of(spec) -> Target:
    """:meth:`Target.parse`, with the host target read once per process (reading
    ``/proc/cpuinfo`` and sysfs costs ~1 ms; every evaluation key asks)."""
    if isinstance(spec, Target):
        return spec
    if spec is None or (isinstance(spec, str) and spec.strip() in ("llvm", "host", "")):
        global _HOST
        if _HOST is None:
            _HOST = Target.host()
        return _HOST
    return Target.parse(spec)


_HOST: Optional[Target] = None
