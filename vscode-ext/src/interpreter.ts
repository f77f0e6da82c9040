// Which Python runs leirc. Pure (no vscode import) so that it is unit-tested in plain Node.

export type InterpreterSource = "setting" | "python-extension" | "default" | "untrusted-default";

export interface Interpreter {
  /** executable to spawn */
  command: string;
  /** arguments that belong to the interpreter itself (e.g. `-X utf8`), before leirc's */
  args: string[];
  source: InterpreterSource;
}

export interface InterpreterInputs {
  /** `leir.server.pythonPath` (may hold `${workspaceFolder}`, `~`, or be empty) */
  setting?: string | null;
  /** the Python extension's selected interpreter, as its API reports it (argv form) */
  pythonExtension?: string[] | null;
  workspaceFolder?: string | null;
  home?: string | null;
  /** used when nothing else is configured */
  fallback?: string;
  /**
   * Workspace Trust. Untrusted: no interpreter inside the workspace folder (its own virtual
   * environment would run the folder's code): the Python extension's choice is not asked and a
   * setting that points into the folder is ignored.
   */
  trusted?: boolean;
}

/** Splits a setting such as `"/opt/py/bin/python -X utf8"` into argv, honouring double quotes. */
export function splitCommandLine(text: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  let any = false;
  for (const ch of text) {
    if (ch === '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && /\s/.test(ch)) {
      if (any) out.push(cur);
      cur = "";
      any = false;
    } else {
      cur += ch;
      any = true;
    }
  }
  if (any) out.push(cur);
  return out;
}

export function expandPath(value: string, workspaceFolder?: string | null, home?: string | null): string {
  let v = value;
  if (workspaceFolder) v = v.split("${workspaceFolder}").join(workspaceFolder);
  if (home && (v === "~" || v.startsWith("~/"))) v = home + v.slice(1);
  return v;
}

/** Setting first, then the Python extension's interpreter, then `python3` on PATH. */
export function resolveInterpreter(inp: InterpreterInputs): Interpreter {
  const setting = (inp.setting ?? "").trim();
  const untrusted = inp.trusted === false;
  if (setting) {
    const argv = splitCommandLine(setting).map((a, i) =>
      i === 0 ? expandPath(a, inp.workspaceFolder, inp.home) : a,
    );
    if (argv.length > 0 && argv[0]) {
      if (untrusted && insideFolder(argv[0], inp.workspaceFolder, setting)) {
        return { command: inp.fallback ?? "python3", args: [], source: "untrusted-default" };
      }
      return { command: argv[0], args: argv.slice(1), source: "setting" };
    }
  }
  if (untrusted) return { command: inp.fallback ?? "python3", args: [], source: "default" };
  const ext = (inp.pythonExtension ?? []).filter((a) => a && a.trim());
  if (ext.length > 0) {
    return { command: ext[0], args: ext.slice(1), source: "python-extension" };
  }
  return { command: inp.fallback ?? "python3", args: [], source: "default" };
}

/** Whether an interpreter path lies in the workspace folder (or is relative, or names the folder). */
function insideFolder(command: string, folder: string | null | undefined, setting: string): boolean {
  if (setting.includes("${workspaceFolder}")) return true;
  if (!command.startsWith("/") && !/^[A-Za-z]:[\\/]/.test(command) && /[\\/]/.test(command)) return true; // relative path
  if (!folder) return false;
  const f = folder.replace(/[\\/]+$/, "");
  return command === f || command.startsWith(f + "/") || command.startsWith(f + "\\");
}

export function describeInterpreter(it: Interpreter): string {
  const where = {
    setting: "from the setting leir.server.pythonPath",
    "python-extension": "the Python extension's selected interpreter",
    default: "the default; set leir.server.pythonPath to choose another",
    "untrusted-default": "the default: leir.server.pythonPath points into this untrusted folder and is not used until you trust it",
  }[it.source];
  return `${[it.command, ...it.args].join(" ")} (${where})`;
}
