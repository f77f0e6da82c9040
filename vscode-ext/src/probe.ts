// Finding out whether the configured Python can run `leirc lsp`, and saying how to fix it. Pure.

import { SAFE_PATH } from "./cli";
import type { Interpreter } from "./interpreter";

/** Prints one JSON line about the interpreter and leirc; never raises (nothing is imported from the working directory). */
export const PROBE_SCRIPT = [
  SAFE_PATH,
  "import importlib.util, json",
  "r = {'python': sys.version.split()[0], 'executable': sys.executable}",
  "try:",
  "    import leirc",
  "    r['leirc'] = getattr(leirc, '__version__', '?')",
  "except Exception as e:",
  "    r['leirc_error'] = '%s: %s' % (type(e).__name__, e)",
  "else:",
  "    r['pygls'] = importlib.util.find_spec('pygls') is not None",
  "    r['lsp_module'] = importlib.util.find_spec('leirc_lsp') is not None",
  "    try:",
  "        from leirc.cli.main import COMMANDS",
  "        r['lsp_command'] = 'lsp' in COMMANDS",
  "    except Exception:",
  "        r['lsp_command'] = False",
  "print(json.dumps(r))",
].join("\n");

export interface ProbeResult {
  /** spawn error code, e.g. ENOENT when the interpreter does not exist */
  spawnError?: string;
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/**
 * How to start the server: `leirc lsp` when the CLI has the command, else its module directly
 * (`leirc lsp` only replaces itself with `python -m leirc_lsp`, so the two are the same server).
 */
export type ServerEntry = "leirc-lsp" | "module";

export type ProbeVerdict =
  | { ok: true; leircVersion: string; python: string; entry: ServerEntry }
  | { ok: false; problem: "no-python" | "no-leirc" | "no-lsp" | "broken"; message: string; installCommand?: string };

export function installCommand(python: Interpreter): string {
  const py = [python.command, ...python.args].map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(" ");
  return `${py} -m pip install "leirc[lsp]"`;
}

export function judgeProbe(python: Interpreter, r: ProbeResult): ProbeVerdict {
  const who = [python.command, ...python.args].join(" ");
  if (r.spawnError) {
    return {
      ok: false,
      problem: "no-python",
      message:
        r.spawnError === "ENOENT"
          ? `Python interpreter '${who}' was not found. Set "leir.server.pythonPath" to a Python (3.10+) that has leirc installed.`
          : `Python interpreter '${who}' could not be started (${r.spawnError}).`,
    };
  }
  let info: Record<string, unknown> | null = null;
  for (const line of r.stdout.split(/\r?\n/).reverse()) {
    if (!line.trim().startsWith("{")) continue;
    try {
      info = JSON.parse(line) as Record<string, unknown>;
      break;
    } catch {
      continue; // not our line; keep looking
    }
  }
  if (!info) {
    const last = r.stderr.trim().split(/\r?\n/).pop() ?? "";
    return { ok: false, problem: "broken", message: `'${who}' did not run the leirc check (exit ${r.exitCode}): ${last}` };
  }
  const cmd = installCommand(python);
  if (typeof info.leirc !== "string") {
    return {
      ok: false,
      problem: "no-leirc",
      message: `leirc is not installed for ${info.executable ?? who} (Python ${info.python}). Install it with: ${cmd}`,
      installCommand: cmd,
    };
  }
  if ((info.lsp_command !== true && info.lsp_module !== true) || info.pygls !== true) {
    const what = info.pygls !== true ? "lacks pygls" : "has no language server (`leirc lsp`)";
    return {
      ok: false,
      problem: "no-lsp",
      message: `leirc ${info.leirc} for ${info.executable ?? who} ${what}: the language server needs leirc with the [lsp] extra. Install it with: ${cmd}`,
      installCommand: cmd,
    };
  }
  const entry: ServerEntry = info.lsp_command === true ? "leirc-lsp" : "module";
  return { ok: true, leircVersion: info.leirc, python: String(info.python), entry };
}
