// Which Python runs leirc. Pure (no vscode import) so that it is unit-tested in plain Node.

export type InterpreterSource = "setting" | "python-extension" | "default";

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
  if (setting) {
    const argv = splitCommandLine(setting).map((a, i) =>
      i === 0 ? expandPath(a, inp.workspaceFolder, inp.home) : a,
    );
    if (argv.length > 0 && argv[0]) {
      return { command: argv[0], args: argv.slice(1), source: "setting" };
    }
  }
  const ext = (inp.pythonExtension ?? []).filter((a) => a && a.trim());
  if (ext.length > 0) {
    return { command: ext[0], args: ext.slice(1), source: "python-extension" };
  }
  return { command: inp.fallback ?? "python3", args: [], source: "default" };
}

export function describeInterpreter(it: Interpreter): string {
  const where = {
    setting: "from the setting leir.server.pythonPath",
    "python-extension": "the Python extension's selected interpreter",
    default: "the default; set leir.server.pythonPath to choose another",
  }[it.source];
  return `${[it.command, ...it.args].join(" ")} (${where})`;
}
