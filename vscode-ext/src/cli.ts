// Command lines for the leirc CLI behind the extension's commands. Pure.

import type { Interpreter } from "./interpreter";

/**
 * Drops what `python -c` puts first on `sys.path` (`''`: the working directory) before anything
 * is imported: a `random.py` or `typing.py` in the folder the editor opened must never be
 * imported by leirc or the language server (issue #33). `sys` is built in, so importing it
 * reads nothing from disk.
 */
export const SAFE_PATH = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]";

/**
 * leirc has no `__main__` module, so the CLI is entered through its `main()`: this works with
 * any interpreter that has leirc installed, console script on PATH or not.
 */
export const LEIRC_ENTRY = `${SAFE_PATH}; from leirc.cli import main; sys.exit(main())`;

/** The language server's module, entered the same way (`python -m` would put the working directory first). */
export const SERVER_ENTRY = `${SAFE_PATH}; from leirc_lsp.server import main; sys.exit(main())`;

/**
 * Environment for every Python the extension starts: `PYTHONSAFEPATH` (3.11+) keeps the working
 * directory off `sys.path` in their children too (`python -m leirc.lower.worker`, ...).
 */
export function safeEnv(base: Record<string, string | undefined>): Record<string, string | undefined> {
  return { ...base, PYTHONUNBUFFERED: "1", PYTHONSAFEPATH: "1" };
}

export interface Invocation {
  command: string;
  args: string[];
}

export function leirc(python: Interpreter, leircArgs: string[]): Invocation {
  return { command: python.command, args: [...python.args, "-c", LEIRC_ENTRY, ...leircArgs] };
}

/** The language server's command line for the entry the probe found. */
export function serverInvocation(python: Interpreter, entry: "leirc-lsp" | "module", extra: string[]): Invocation {
  return entry === "leirc-lsp"
    ? leirc(python, ["lsp", ...extra])
    : { command: python.command, args: [...python.args, "-c", SERVER_ENTRY, ...extra] };
}

export type Target = "llvm" | "cuda";

export interface BuildSettings {
  target: Target;
  threads: number;
  optLevel: "0" | "1";
}

export function buildArgs(file: string, outDir: string, s: BuildSettings): string[] {
  const emit = s.target === "cuda" ? "tir,cuda,lib" : "tir,lib";
  return ["build", file, `-O${s.optLevel}`, "-t", s.target, "-o", outDir, "--emit", emit, "--threads", String(s.threads)];
}

/** Show TIR / Show CUDA: emit only the text, no verification (it is for reading). */
export function showArgs(file: string, outDir: string, kind: "tir" | "cuda", s: BuildSettings): string[] {
  const target = kind === "cuda" ? "cuda" : s.target;
  return ["build", file, `-O${s.optLevel}`, "-t", target, "-o", outDir, "--emit", kind, "--no-verify"];
}

export interface SearchSettings {
  target: Target;
  threads: number;
  budget: number;
  rpcTracker: string;
  rpcKey: string;
  extraArgs: string[];
}

export function searchArgs(file: string, outDir: string, s: SearchSettings): string[] {
  const args = ["build", file, "-O", "search", "-t", s.target, "-o", outDir, "--threads", String(s.threads)];
  args.push("--budget", String(s.budget));
  if (s.rpcTracker) args.push("--rpc", s.rpcTracker);
  if (s.rpcTracker && s.rpcKey) args.push("--key", s.rpcKey);
  args.push(...s.extraArgs);
  return args;
}

export function verifyArgs(file: string, reference: string | null, target: Target | "interp"): string[] {
  const args = ["verify", file];
  if (reference) args.push(reference);
  args.push("-t", target, "--json");
  return args;
}

/** The files a build reports as `wrote PATH` on stderr, in order. */
export function writtenFiles(stderr: string): string[] {
  const out: string[] = [];
  for (const line of stderr.split(/\r?\n/)) {
    const m = /^wrote (.+)$/.exec(line.trim());
    if (m) out.push(m[1]);
  }
  return out;
}

/** Expands `${workspaceFolder}`, `${fileDirname}`, `${fileBasenameNoExtension}`, `${fileBasename}`. */
export function expandTemplate(template: string, vars: Record<string, string | undefined>): string {
  return template.replace(/\$\{(\w+)\}/g, (whole, name: string) => vars[name] ?? whole);
}
