"""End-to-end benchmark of the PyTorch frontend: every workload in benchmarks/workloads/.

For each KernelBench-format module: import (torch.fx -> LEIR), compile with leirc -O0
(the naive lowering through TVM, LLVM CPU target), verify the compiled kernel against the
PyTorch module on 3 input seeds (leirc correctness rule), and time PyTorch eager,
torch.compile and the compiled kernel with the same protocol (fixed threads, rotating
input sets, warm-ups, median of 10 measurements of >= 50 ms; benchmarking.md §4.2).
Each workload runs in its own subprocess (a crash or hang fails only that row). Prints a
markdown table and a summary (fast_0, fast_1, geometric-mean speedups) for BENCHMARKS.md.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE TVM_NUM_THREADS=2 .venv/bin/python benchmarks/run.py

Options: ``--only SUBSTR`` (repeatable), ``--no-compile`` (skip torch.compile, the slowest
part), ``--json FILE`` (raw per-workload reports), ``--timeout S`` per workload.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def child(path: str, out: str, threads: int, torch_compile: bool, opt: str = "0") -> int:
    from leirc.driver import BuildOptions, ModelImportError, PipelineError, model_report, new_build, run_pipeline

    b = new_build(path, options=BuildOptions(opt=opt, time=True, torch_compile=torch_compile, threads=threads),
                  log=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    error = None
    try:
        b = run_pipeline(b)
    except ModelImportError as e:
        error = f"import: {e}"
    except PipelineError as e:
        error = f"{e.pass_name}: " + "; ".join(f"{d.code} {d.message}" for d in e.diagnostics[:2])
    rep = model_report(b)
    if error:
        rep["error"] = error
        if rep["imported"] is False:
            rep["import_error"] = error
        elif not rep["built"]:
            rep["build_error"] = error
    with open(out, "w") as f:
        json.dump(rep, f)
    return 0


def _fmt_ms(x):
    if x is None:
        return "n/a"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _fmt_x(x):
    return "n/a" if x is None else f"{x:.3g}×"


def _geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def table(reports: list, cmd: str, meta: dict) -> str:
    lines = []
    lines.append("| Workload | Imported | Verified | PyTorch eager ms | torch.compile ms | leirc -O0 ms | "
                 "speedup vs eager | speedup vs compile |")
    lines.append("|---|:-:|:-:|--:|--:|--:|--:|--:|")
    failures = []
    for r in reports:
        name = os.path.splitext(os.path.basename(r["model"]))[0]
        imp = "✓" if r.get("imported") else "✗"
        if r.get("verified") is None:
            ver = "–" if not r.get("imported") or not r.get("built") else "?"
        else:
            ver = "✓" if r["verified"] else "✗"
        lines.append(f"| {name} | {imp} | {ver} | {_fmt_ms(r.get('eager_ms'))} | {_fmt_ms(r.get('compile_ms'))} | "
                     f"{_fmt_ms(r.get('leirc_ms'))} | {_fmt_x(r.get('speedup_eager'))} | "
                     f"{_fmt_x(r.get('speedup_compile'))} |")
        why = (r.get("import_error") or r.get("build_error") or r.get("error")
               or (r.get("verify_summary") if r.get("verified") is False else None) or r.get("leirc_error"))
        if why:
            failures.append(f"* `{name}`: {why}")
        elif r.get("compile_error"):
            failures.append(f"* `{name}`: torch.compile n/a ({r['compile_error']})")
    n = len(reports)
    correct = [r for r in reports if r.get("verified")]
    fast1 = [r for r in correct if r.get("speedup_eager") and r["speedup_eager"] > 1.0]
    ge = _geomean([r.get("speedup_eager") for r in correct])
    with_c = [r for r in correct if r.get("speedup_compile")]
    gc = _geomean([r.get("speedup_compile") for r in with_c])
    imported = sum(1 for r in reports if r.get("imported"))
    out = ["\n".join(lines), ""]
    out.append(f"**Summary** ({n} workloads): imported {imported}/{n}; "
               f"**fast_0** (verified against PyTorch) = {len(correct)}/{n} = {len(correct) / max(n, 1):.2f}; "
               f"**fast_1** (verified and faster than PyTorch eager) = {len(fast1)}/{n} = {len(fast1) / max(n, 1):.2f}.")
    out.append(f"Geometric-mean speedup of leirc -O0 over the {len(correct)} verified workloads: "
               f"vs PyTorch eager {_fmt_x(ge)}; vs torch.compile {_fmt_x(gc)} (over the {len(with_c)} with a "
               f"torch.compile time); vs leirc -O0 1.00× by definition (this table *is* the -O0 baseline, "
               f"the naive one-nest-per-operator lowering).")
    out.append("")
    out.append(f"Command: `{cmd}`. Threads: PyTorch {meta.get('torch_threads')}, TVM {meta.get('tvm_threads')}. "
               f"Versions: {meta.get('versions')}. Host: {meta.get('host')}; load average at start "
               f"{meta.get('load_start')}, at end {meta.get('load_end')}. Total wall time {meta.get('wall_s', 0):.0f} s.")
    if failures:
        out.append("")
        out.append("Failures and notes:")
        out.extend(failures)
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", metavar="MODEL", help=argparse.SUPPRESS)
    ap.add_argument("--json-out", help=argparse.SUPPRESS)
    ap.add_argument("--workloads", default=os.path.join(HERE, "workloads"))
    ap.add_argument("--only", action="append", default=[], help="run workloads whose name contains this")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-O", dest="opt", default="0", choices=["0", "1"], help="leirc optimization level (default 0)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per workload")
    ap.add_argument("--json", help="write the raw reports here")
    ap.add_argument("--markdown", help="also write the table here")
    ap.add_argument("--from-json", metavar="FILE", help="only re-print the table of a previous --json run")
    args = ap.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as fh:
            saved = json.load(fh)
        meta = saved["meta"]
        print(table(saved["reports"], meta.get("command", "benchmarks/run.py"), meta))
        return 0
    if args.child:
        return child(args.child, args.json_out, args.threads, not args.no_compile, args.opt)

    files = sorted(glob.glob(os.path.join(args.workloads, "*.py")))
    if args.only:
        files = [f for f in files if any(s in os.path.basename(f) for s in args.only)]
    env = dict(os.environ)
    env.setdefault("TVM_NUM_THREADS", str(args.threads))
    cache = tempfile.mkdtemp(prefix="leirc-bench-inductor-")
    env["TORCHINDUCTOR_CACHE_DIR"] = cache
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    reports = []
    t_start = time.time()
    load_start = _load()
    tmpdir = tempfile.mkdtemp(prefix="leirc-bench-")
    try:
        for k, f in enumerate(files):
            name = os.path.basename(f)
            print(f"[{k + 1}/{len(files)}] {name}", file=sys.stderr, flush=True)
            out = os.path.join(tmpdir, f"{k}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", f, "--json-out", out,
                   "--threads", str(args.threads), "-O", args.opt] + (["--no-compile"] if args.no_compile else [])
            t0 = time.time()
            try:
                p = subprocess.run(cmd, env=env, timeout=args.timeout, stdout=subprocess.DEVNULL)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rc == 0 and os.path.exists(out):
                with open(out) as fh:
                    rep = json.load(fh)
            else:
                rep = {"model": f, "error": f"benchmark child failed ({'timed out' if rc == 'timeout' else f'exit {rc}'})"}
            rep["wall_s"] = time.time() - t0
            reports.append(rep)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(tmpdir, ignore_errors=True)
    meta = {
        "torch_threads": next((r.get("torch_threads") for r in reports if r.get("torch_threads")), args.threads),
        "tvm_threads": next((r.get("tvm_threads") for r in reports if r.get("tvm_threads")), env["TVM_NUM_THREADS"]),
        "versions": next((r.get("versions") for r in reports if r.get("versions")), {}),
        "host": f"{os.cpu_count()} CPUs",
        "load_start": load_start, "load_end": _load(), "wall_s": time.time() - t_start,
    }
    env_desc = " ".join(f"-u {v}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if v not in os.environ)
    cmd = (f"env {env_desc} TVM_NUM_THREADS={env['TVM_NUM_THREADS']} .venv/bin/python benchmarks/run.py"
           + (f" --threads {args.threads}" if args.threads != 2 else "")
           + (" --no-compile" if args.no_compile else "") + "".join(f" --only {s}" for s in args.only))
    meta["command"] = cmd
    md = table(reports, cmd, meta)
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(md + "\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "reports": reports}, fh, indent=1)
    return 0


def _load():
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


if __name__ == "__main__":
    sys.exit(main())
