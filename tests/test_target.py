"""The target is read from what the OS grants, not from the CPU's name.

The host in these tests is *described* (cpuinfo text, an LLVM CPU name), so the case that
broke every kernel -- a VM whose CPU LLVM names ``znver4`` while the hypervisor masks AVX-512 --
is tested on any x86 machine: the build must hold no ``zmm`` register and must run here."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from leirc.lang.load import load_kernel
from leirc.target import Target, TargetError, X86_FEATURES, parse_cpuinfo, read_caches

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the feature table is x86's")

KERNEL = r"""
\kernel vrelu(X: f32[64, 64]) -> (Y: f32[64, 64]) {
  L^{64}_{i=0} V^{64}_{j=0} [
    Y^{f32,g}_{i,j} = max(X^{f32,g}_{i,j} * 2.0, 0.0);
  ];
}
"""

AVX512_HOST_FLAGS = ("fpu sse sse2 pni ssse3 fma sse4_1 sse4_2 movbe popcnt aes xsave avx f16c bmi1 avx2 bmi2 "
                     "avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi avx512_vnni")


def cpuinfo(flags: str, model: str = "AMD EPYC 9R14 96-Core Processor") -> str:
    return (f"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: {model}\nflags\t\t: {flags}\n\n"
            f"processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: {model}\nflags\t\t: {flags}\n")


def masked(flags: str) -> str:
    """What a hypervisor that hides AVX-512 shows: the same CPU without any avx512 flag."""
    return " ".join(f for f in flags.split() if not f.startswith("avx512"))


def host_flags() -> str:
    with open("/proc/cpuinfo") as f:
        return " ".join(parse_cpuinfo(f.read())["flags"])


def zmm_count(built, tmp_path) -> int:
    lib = tmp_path / f"k{len(os.listdir(tmp_path))}.so"
    built.export_library(str(lib))
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    return len(re.findall(r"%zmm\d+", asm))


needs_objdump = pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")


def test_a_masked_avx512_host_gets_no_avx512_feature_and_its_kernel_holds_no_zmm_and_runs(tmp_path):
    from leirc.lower import build, resolve_target

    if shutil.which("objdump") is None:
        pytest.fail("objdump (binutils, installed with gcc) is needed to read the built code")
    res = load_kernel(KERNEL)
    # the control: the same CPU name with AVX-512 granted does emit zmm code, so the check can fail
    granted = Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS), llvm_cpu="znver4")
    assert "avx512f" in granted.features and granted.vector_bits == 512
    assert zmm_count(build(res, granted), tmp_path) > 0
    # the name alone (what leirc used to pass) implies AVX-512 too
    assert zmm_count(build(res, {"kind": "llvm", "mcpu": "znver4"}), tmp_path) > 0

    # the VM: LLVM calls it znver4, the OS grants no AVX-512. Use this machine's own flags minus
    # AVX-512 so the kernel can run here whatever this CPU is.
    vm = Target.host(cpuinfo=cpuinfo(masked(host_flags())), llvm_cpu="znver4")
    assert not any(f.startswith("avx512") for f in vm.features)
    assert vm.vector_bits <= 256 and vm.lanes() <= 8
    tvm_target = resolve_target(vm)
    assert tvm_target["mcpu"] == "znver4"
    assert "-avx512f" in tvm_target["mattr"] and "+avx512f" not in tvm_target["mattr"]
    built = build(res, vm)
    assert zmm_count(built, tmp_path) == 0
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    y = built.run({"X": x})["Y"]
    np.testing.assert_array_equal(y, np.maximum(x * np.float32(2.0), np.float32(0.0)))


def test_a_described_target_travels_to_the_sandboxed_worker():
    """The worker builds for the Target it is sent (as JSON), not for its own host."""
    from leirc.lower.session import KernelSession

    vm = Target.host(cpuinfo=cpuinfo(masked(host_flags())), llvm_cpu="znver4")
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32)
    with KernelSession(KERNEL, target=vm, threads=1) as s:
        r = s.run({"X": x}, {"Y": np.zeros((64, 64), np.float32)})
    assert r.ok, r.error
    np.testing.assert_array_equal(r.outputs["Y"], np.maximum(x * np.float32(2.0), np.float32(0.0)))


def test_the_host_target_lists_only_features_present_in_proc_cpuinfo_flags():
    t = Target.host()
    flags = set(host_flags().split())
    allowed = {X86_FEATURES[f] for f in flags if f in X86_FEATURES}
    assert t.features is not None and set(t.features) <= allowed
    assert set(t.features) == allowed  # and every one of them
    assert t.vector_bits == (512 if "avx512f" in flags else 256 if "avx2" in flags or "avx" in flags else 128)
    assert t.cores == len(os.sched_getaffinity(0))


def test_leirc_target_json_lists_only_granted_features_and_the_masked_ones():
    p = subprocess.run([sys.executable, "-m", "leirc", "target", "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["ok"] and d["command"] == "target"
    t = d["target"]
    flags = set(host_flags().split())
    allowed = {X86_FEATURES[f] for f in flags if f in X86_FEATURES}
    assert set(t["features"]) <= allowed
    assert set(t["llvm_features"]) <= allowed  # what LLVM will actually use, after -mattr
    assert t["fingerprint"] == Target.host().fingerprint
    assert t["tvm"]["mcpu"] == t["llvm_cpu"]
    human = subprocess.run([sys.executable, "-m", "leirc", "target"], capture_output=True, text=True, timeout=120)
    assert human.returncode == 0 and t["fingerprint"] in human.stdout and "features" in human.stdout


def test_fingerprints_differ_by_what_decides_code_and_speed():
    base = Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS), cores=2)
    assert base.fingerprint == Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS), cores=2).fingerprint
    assert base.fingerprint != Target.host(cpuinfo=cpuinfo(masked(AVX512_HOST_FLAGS)), cores=2).fingerprint
    assert base.fingerprint != Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS), cores=4).fingerprint
    assert base.fingerprint != Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS, model="Intel Xeon"), cores=2).fingerprint
    assert Target.parse("cuda").fingerprint != Target.parse("cuda -arch=sm_80").fingerprint
    again = Target.from_json(json.loads(json.dumps(base.to_json())))
    assert again == base and again.fingerprint == base.fingerprint


def test_target_specs_parse_or_say_why_not():
    t = Target.parse("llvm -mcpu=x86-64-v3 -mattr=-fma")
    assert t.cpu == "x86-64-v3" and t.features is None and t.mattr == ("-fma",)
    assert Target.parse(t.spec()) == t
    assert Target.parse("llvm -mattr=-avx512f").vector_bits <= 256
    assert Target.parse("cuda -arch=sm_80").arch == "sm_80"
    for bad, why in [("tpu", "unknown target"), ("llvm -mcpu", "-key=value"), ("llvm -foo=1", "unknown llvm"),
                     ("llvm -mattr=avx2", r"\+feature or -feature"), ("cuda -arch=volta", "SM architecture")]:
        with pytest.raises(TargetError, match=why):
            Target.parse(bad)


def test_cache_sizes_come_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "1024K"),
                                             (3, "Unified", "32768K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert read_caches(str(tmp_path)) == {"L1d": 48 << 10, "L2": 1 << 20, "L3": 32 << 20}
    t = Target.host(cpuinfo=cpuinfo(AVX512_HOST_FLAGS), sysfs=str(tmp_path))
    assert t.cache("L2") == 1 << 20


def test_a_sigill_is_a_crash_verdict_that_names_the_cause():
    from leirc.lower.session import classify_exit

    msg, kind = classify_exit(-4, "")
    assert kind == "crash" and "SIGILL" in msg and "leirc target" in msg


def test_an_evaluation_cached_under_one_target_is_not_returned_under_another(tmp_path):
    from leirc.engine.evaluate import Evaluator

    here = Target.host()
    other = Target.host(cpuinfo=cpuinfo(masked(host_flags())))  # same machine, AVX-512 masked
    assert here.fingerprint != other.fingerprint
    cache = str(tmp_path / "cache")
    with Evaluator(here, time=False, cache_dir=cache, seeds=(0,), dists=("uniform",), prestart=False) as ev:
        first = ev.evaluate(KERNEL)
    assert first.ok and first.target == here.fingerprint and not first.cached
    with Evaluator(other, time=False, cache_dir=cache, seeds=(0,), dists=("uniform",), prestart=False) as ev:
        elsewhere = ev.evaluate(KERNEL)
        assert ev.stats["disk_hits"] == 0 and ev.stats["builds"] == 1
    assert elsewhere.ok and not elsewhere.cached and elsewhere.target == other.fingerprint
    with Evaluator(Target.host(), time=False, cache_dir=cache, seeds=(0,), dists=("uniform",), prestart=False) as ev:
        again = ev.evaluate(KERNEL)
        assert ev.stats["disk_hits"] == 1 and ev.stats["builds"] == 0
    assert again.cached and again.target == here.fingerprint


def test_htam_memory_is_kept_per_target_fingerprint_and_imported_only_explicitly(tmp_path):
    from leirc.search.memory import Memory

    path = str(tmp_path / "memory.sqlite")
    vm = Target.host(cpuinfo=cpuinfo(masked(host_flags())))
    here = Memory(path, target="llvm")
    here.record([], "loop_parallelization", 0.7)
    tried_here = {d: s.tries for d, s in here.directions.items() if s.tries}
    assert tried_here and here.target == f"llvm:{Target.host().fingerprint}"
    exported = here.export()
    here.close()
    other = Memory(path, target=vm)  # the same file on a machine whose AVX-512 is masked
    assert other.target != f"llvm:{Target.host().fingerprint}"
    assert not any(s.tries for s in other.directions.values())  # nothing leaks across fingerprints
    assert other.import_(exported) > 0  # the explicit way to carry it over
    assert {d: s.tries for d, s in other.directions.items() if s.tries} == tried_here
    other.close()
    again = Memory(path, target="llvm")
    assert {d: s.tries for d, s in again.directions.items() if s.tries} == tried_here  # unchanged by the import
    again.close()


def test_a_search_state_records_its_target_and_a_resume_on_another_refuses(tmp_path):
    from leirc.search.core import SearchOptions
    from leirc.search.store import ConfigMismatch, SearchStore

    here = SearchOptions(target="llvm").config()
    vm = SearchOptions(target=Target.host(cpuinfo=cpuinfo(masked(host_flags())))).config()
    assert here["target_fingerprint"] == Target.host().fingerprint
    assert vm["target_fingerprint"] != here["target_fingerprint"]
    store = SearchStore(str(tmp_path / "state.sqlite"))
    store.start(here, resume=False)
    store.start(here, resume=True)  # the same machine resumes
    with pytest.raises(ConfigMismatch, match="target_fingerprint"):
        store.start(vm, resume=True)
    store.close()
