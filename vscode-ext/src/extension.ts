// The VS Code side: starts `leirc lsp`, runs the leirc CLI for the commands, shows results.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import {
  BuildSettings,
  SearchSettings,
  Target,
  buildArgs,
  expandTemplate,
  leirc,
  safeEnv,
  searchArgs,
  serverInvocation,
  showArgs,
  verifyArgs,
  writtenFiles,
} from "./cli";
import { CrashPolicy } from "./crashPolicy";
import { Interpreter, describeInterpreter, resolveInterpreter } from "./interpreter";
import { Fallback, parseStatus, statusText, statusTooltip, toNotify } from "./fallbacks";
import { kernelAt } from "./kernels";
import { PROBE_SCRIPT, ServerEntry, judgeProbe } from "./probe";
import { RunResult, runProcess } from "./run";
import { configurationChange, lensVerification, parseSuggestions, serverSettings } from "./settings";
import { summarizeVerify } from "./verifyReport";

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
let fallbackItem: vscode.StatusBarItem;
let fallbacks: Fallback[] = [];
const notified = new Set<string>();
let extensionContext: vscode.ExtensionContext;
const crashPolicy = new CrashPolicy();
const lensSeen = new Map<string, string>();

function config(resource?: vscode.Uri): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("leir", resource);
}

function log(line: string): void {
  output.info(line);
}

function settingGetter(resource?: vscode.Uri) {
  const c = config(resource);
  return <T>(key: string, fallback: T): T => c.get<T>(key, fallback);
}

async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string[] | null> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (!ext) return null;
  try {
    if (!ext.isActive) await ext.activate();
    // The Python extension's API has changed shape over time; accept the current and the older one.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const api: any = ext.exports;
    const envPath = api?.environments?.getActiveEnvironmentPath?.(resource);
    if (envPath) {
      const env = await api.environments.resolveEnvironment?.(envPath);
      const exe: string | undefined = env?.executable?.uri?.fsPath ?? envPath.path;
      if (exe) return [exe];
    }
    const details = api?.settings?.getExecutionDetails?.(resource);
    if (Array.isArray(details?.execCommand) && details.execCommand.length > 0) return details.execCommand;
  } catch (e) {
    log(`could not ask the Python extension for its interpreter: ${e}`);
  }
  return null;
}

function workspaceFolderOf(resource?: vscode.Uri): string | undefined {
  const folder = resource ? vscode.workspace.getWorkspaceFolder(resource) : vscode.workspace.workspaceFolders?.[0];
  return folder?.uri.fsPath;
}

async function interpreter(resource?: vscode.Uri): Promise<Interpreter> {
  // In Restricted Mode VS Code hands back only the user's value of this (restricted) setting,
  // and the Python extension's choice may be the folder's own virtual environment: not used.
  const setting = config(resource).get<string>("server.pythonPath", "");
  return resolveInterpreter({
    setting,
    pythonExtension: setting || !vscode.workspace.isTrusted ? null : await pythonExtensionInterpreter(resource),
    trusted: vscode.workspace.isTrusted,
    workspaceFolder: workspaceFolderOf(resource),
    home: os.homedir(),
  });
}

function childEnv(): NodeJS.ProcessEnv {
  return safeEnv(process.env);
}

/**
 * The working directory of the language server and the probe: a directory of the extension's
 * own, never the workspace (whose `random.py` would otherwise be first on the import path of
 * every `python -m` the server starts).
 */
function privateDir(): string {
  const dir = extensionContext.globalStorageUri.fsPath;
  try {
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  } catch {
    return os.tmpdir(); // read-only profile: still not the workspace, and SAFE_PATH/-P cover the rest
  }
}

/** Workspace Trust: anything that builds, runs or sends a kernel needs it. Says why when refused. */
function requireTrust(what: string): boolean {
  if (vscode.workspace.isTrusted) return true;
  void vscode.window
    .showWarningMessage(`LEIR: ${what} runs code; this folder is not trusted (Restricted Mode).`, "Manage Workspace Trust")
    .then((c) => c && vscode.commands.executeCommand("workbench.trust.manage"));
  return false;
}


/** Checks that the interpreter has leirc with the language server; tells the user how to fix it if not. */
async function checkInstallation(py: Interpreter): Promise<ServerEntry | null> {
  const r = await runProcess(py.command, [...py.args, "-c", PROBE_SCRIPT], { cwd: privateDir(), env: childEnv(), timeoutMs: 60_000 });
  const verdict = judgeProbe(py, r);
  if (verdict.ok) {
    log(`leirc ${verdict.leircVersion} on Python ${verdict.python}: ${describeInterpreter(py)}`);
    return verdict.entry;
  }
  log(verdict.message);
  const buttons = verdict.installCommand ? ["Copy install command", "Open Settings", "Show Output"] : ["Open Settings", "Show Output"];
  void vscode.window.showErrorMessage(`LEIR: ${verdict.message}`, ...buttons).then(async (choice) => {
    if (choice === "Copy install command" && verdict.installCommand) {
      await vscode.env.clipboard.writeText(verdict.installCommand);
    } else if (choice === "Open Settings") {
      await vscode.commands.executeCommand("workbench.action.openSettings", "leir.server.pythonPath");
    } else if (choice === "Show Output") {
      output.show(true);
    }
  });
  return null;
}

async function startClient(): Promise<void> {
  const py = await interpreter();
  const entry = await checkInstallation(py);
  if (!entry) {
    setStatus("error", "leirc not found", "The language server is not running: see the LEIR output.");
    return;
  }
  const run = serverInvocation(py, entry, config().get<string[]>("server.extraArgs", []));
  // No `transport`: the client then talks over stdio without appending `--stdio`.
  const options = { cwd: privateDir(), env: childEnv() };
  const serverOptions: ServerOptions = {
    run: { command: run.command, args: run.args, options },
    debug: { command: run.command, args: run.args, options },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "leir" },
      { scheme: "untitled", language: "leir" },
    ],
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: serverSettings(settingGetter(), vscode.workspace.isTrusted),
    middleware: {
      // The server's lens titles carry its background verifications ("✓ equal · 3.2 ms llvm"):
      // the status bar shows the newest one, as it shows the Verify command's result.
      provideCodeLenses: async (document, token, next) => {
        const lenses = await next(document, token);
        for (const lens of lenses ?? []) {
          // The server's suggest command only returns data; the extension's shows and applies it.
          if (lens.command?.command === "leirc.suggest") lens.command.command = "leir.suggestOptimization";
          const title = lens.command?.title ?? "";
          const outcome = lensVerification(title);
          const key = `${document.uri.toString()}#${lens.command?.arguments?.[1]}`;
          if (outcome && lensSeen.get(key) !== title) {
            lensSeen.set(key, title);
            setStatus(outcome, `${lens.command?.arguments?.[1] ?? ""} ${title}`.trim(), `${path.basename(document.uri.fsPath)}: ${title} (language server, ${new Date().toLocaleTimeString()})`);
          }
        }
        return lenses;
      },
    },
    errorHandler: {
      error: (_error, _message, count) => ({ action: (count ?? 0) < 3 ? ErrorAction.Continue : ErrorAction.Shutdown }),
      closed: () => {
        const d = crashPolicy.onCrash(Date.now());
        if (d.restart) {
          log(`the language server stopped unexpectedly (${d.count} in ${crashPolicy.windowMs / 60000} min); restarting it`);
          void vscode.window.showWarningMessage(
            `LEIR language server stopped unexpectedly; restarting it (${d.count}/${crashPolicy.maxCrashes - 1}).`,
            "Show Output",
          ).then((c) => c && output.show(true));
          return { action: CloseAction.Restart, handled: true };
        }
        log(`the language server crashed ${d.count} times in ${crashPolicy.windowMs / 60000} min; not restarting it`);
        setStatus("error", "server stopped", "The language server crashed repeatedly; run “LEIR: Restart language server”.");
        void vscode.window.showErrorMessage(
          `LEIR language server crashed ${d.count} times in ${crashPolicy.windowMs / 60000} minutes and was not restarted.`,
          "Restart",
          "Show Output",
        ).then((c) => {
          if (c === "Restart") void vscode.commands.executeCommand("leir.restartServer");
          else if (c === "Show Output") output.show(true);
        });
        return { action: CloseAction.DoNotRestart, handled: true };
      },
    },
  };
  client = new LanguageClient("leir", "LEIR language server", serverOptions, clientOptions);
  client.onDidChangeState((e) => log(`language server: ${State[e.oldState]} -> ${State[e.newState]}`));
  client.onNotification("leirc/status", (params: unknown) => showFallbacks(parseStatus(params)));
  log(`starting ${[run.command, ...run.args.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a))].join(" ")}`);
  try {
    await client.start();
  } catch (e) {
    log(`the language server did not start: ${e}`);
    void vscode.window.showErrorMessage(`LEIR language server did not start: ${e}`, "Show Output").then(
      (c) => c && output.show(true),
    );
  }
}

async function restartClient(): Promise<void> {
  crashPolicy.reset();
  const old = client;
  client = undefined;
  if (old) {
    try {
      await old.stop();
    } catch (e) {
      log(`stopping the old server: ${e}`); // it may have died already; a new one starts anyway
    }
  }
  await startClient();
}

// ---- status bar ------------------------------------------------------------------------------

function setStatus(kind: "equal" | "different" | "error" | "busy" | "idle", text: string, tooltip?: string): void {
  const icon = { equal: "$(pass-filled)", different: "$(error)", error: "$(warning)", busy: "$(sync~spin)", idle: "$(beaker)" }[kind];
  statusItem.text = `${icon} LEIR: ${text}`;
  statusItem.tooltip = tooltip ?? "Last LEIR verification. Click to verify the current file.";
  statusItem.backgroundColor =
    kind === "different" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  statusItem.show();
}

// ---- fallbacks: what the server does not use, and why --------------------------------------

/** The status bar says it (hidden when nothing falls back); each distinct reason is also notified once. */
function showFallbacks(list: Fallback[]): void {
  fallbacks = list;
  const text = statusText(list);
  if (!text) {
    fallbackItem.hide();
  } else {
    fallbackItem.text = text;
    fallbackItem.tooltip = statusTooltip(list);
    fallbackItem.show();
  }
  for (const f of toNotify(list, notified)) {
    log(`${f.what} not used: ${f.message}`);
    void vscode.window.showWarningMessage(`LEIR: ${f.message}`, "Open Settings").then((c) => {
      if (c) void vscode.commands.executeCommand("workbench.action.openSettings", f.setting);
    });
  }
}

async function fallbacksCommand(): Promise<void> {
  if (fallbacks.length === 0) return;
  const pick = fallbacks.length === 1 ? { f: fallbacks[0] } : await vscode.window.showQuickPick(
    fallbacks.map((f) => ({ label: f.what, detail: f.message, description: f.setting, f })),
    { title: "LEIR: not used, and why", placeHolder: "Pick one to open its setting" },
  );
  if (pick) await vscode.commands.executeCommand("workbench.action.openSettings", pick.f.setting);
}

// ---- commands that run the CLI ---------------------------------------------------------------

async function leirDocument(uri?: vscode.Uri): Promise<vscode.TextDocument | undefined> {
  const doc = uri ? await vscode.workspace.openTextDocument(uri) : vscode.window.activeTextEditor?.document;
  if (!doc || doc.languageId !== "leir") {
    void vscode.window.showWarningMessage("LEIR: open a .leir file first.");
    return undefined;
  }
  if (doc.isUntitled) {
    void vscode.window.showWarningMessage("LEIR: save the file first; leirc works on files on disk.");
    return undefined;
  }
  if (doc.isDirty) await doc.save();
  return doc;
}

function fileVars(doc: vscode.TextDocument): Record<string, string | undefined> {
  const file = doc.uri.fsPath;
  return {
    workspaceFolder: workspaceFolderOf(doc.uri) ?? path.dirname(file),
    fileDirname: path.dirname(file),
    fileBasename: path.basename(file),
    fileBasenameNoExtension: path.basename(file, path.extname(file)),
  };
}

function buildSettings(doc: vscode.TextDocument): BuildSettings {
  const c = config(doc.uri);
  return {
    target: c.get<Target>("target", "llvm"),
    threads: c.get<number>("threads", 2),
    optLevel: c.get<"0" | "1">("optLevel", "1"),
  };
}

/** Runs leirc with a progress notification; Cancel ends its whole process group. */
async function runLeirc(title: string, doc: vscode.TextDocument, args: string[]): Promise<RunResult> {
  const py = await interpreter(doc.uri);
  const inv = leirc(py, args);
  log(`$ leirc ${args.join(" ")}`);
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (progress, token) => {
      const abort = new AbortController();
      const sub = token.onCancellationRequested(() => abort.abort());
      let pending = "";
      try {
        const r = await runProcess(inv.command, inv.args, {
          cwd: path.dirname(doc.uri.fsPath),
          env: childEnv(),
          signal: abort.signal,
          onStderr: (chunk) => {
            output.append(chunk);
            pending += chunk;
            const lines = pending.split(/\r?\n|\r/);
            pending = lines.pop() ?? "";
            const last = lines.filter((l) => l.trim()).pop();
            if (last) progress.report({ message: last.replace(/^leirc: /, "").slice(0, 120) });
          },
        });
        if (r.spawnError) log(`could not start ${inv.command}: ${r.spawnError}`);
        else log(r.cancelled ? "cancelled" : `exit ${r.exitCode}`);
        return r;
      } finally {
        sub.dispose();
      }
    },
  );
}

function lastErrorLine(r: RunResult): string {
  if (r.spawnError) return `could not start Python (${r.spawnError})`;
  const lines = r.stderr.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  const err = lines.filter((l) => /error/i.test(l)).pop();
  return (err ?? lines.pop() ?? `exit ${r.exitCode}`).replace(/^leirc: (error: )?/, "");
}

async function buildCommand(uri?: vscode.Uri): Promise<void> {
  if (!requireTrust("Build")) return;
  const doc = await leirDocument(uri);
  if (!doc) return;
  const outDir = expandTemplate(config(doc.uri).get<string>("build.outputDirectory", ""), fileVars(doc));
  const r = await runLeirc(`LEIR: building ${path.basename(doc.uri.fsPath)}`, doc, buildArgs(doc.uri.fsPath, outDir, buildSettings(doc)));
  if (r.cancelled) return;
  if (r.exitCode !== 0) {
    void vscode.window.showErrorMessage(`LEIR build failed: ${lastErrorLine(r)}`, "Show Output").then((c) => c && output.show(true));
    return;
  }
  const files = writtenFiles(r.stderr);
  const tir = files.find((f) => f.endsWith(".tir.py"));
  const choice = await vscode.window.showInformationMessage(
    `LEIR: built ${path.basename(doc.uri.fsPath)}: wrote ${files.length} files to ${outDir}`,
    ...(tir ? ["Open TIR"] : []),
    "Show Output",
  );
  if (choice === "Open TIR" && tir) await vscode.window.showTextDocument(vscode.Uri.file(tir), { preview: true });
  else if (choice === "Show Output") output.show(true);
}

async function showCommand(kind: "tir" | "cuda", uri?: vscode.Uri): Promise<void> {
  if (!requireTrust(`Show ${kind.toUpperCase()}`)) return;
  const doc = await leirDocument(uri);
  if (!doc) return;
  const editor = vscode.window.activeTextEditor;
  const offset = editor && editor.document === doc ? doc.offsetAt(editor.selection.active) : 0;
  const kernel = kernelAt(doc.getText(), offset);
  const outDir = fs.mkdtempSync(path.join(os.tmpdir(), `leir-${kind}-`));
  const args = showArgs(doc.uri.fsPath, outDir, kind, buildSettings(doc));
  if (kernel) args.push("--kernel", kernel);
  const r = await runLeirc(`LEIR: lowering ${kernel ?? path.basename(doc.uri.fsPath)} to ${kind.toUpperCase()}`, doc, args);
  if (r.cancelled) return;
  const suffix = kind === "tir" ? ".tir.py" : ".cu";
  const file = writtenFiles(r.stderr).find((f) => f.endsWith(suffix));
  if (r.exitCode !== 0 || !file) {
    void vscode.window.showErrorMessage(`LEIR: no ${kind.toUpperCase()}: ${lastErrorLine(r)}`, "Show Output").then((c) => c && output.show(true));
    return;
  }
  await vscode.window.showTextDocument(vscode.Uri.file(file), { viewColumn: vscode.ViewColumn.Beside, preview: true });
}

async function verifyCommand(uri?: vscode.Uri, reference?: vscode.Uri | string): Promise<void> {
  if (!requireTrust("Verify")) return;
  const doc = await leirDocument(uri instanceof vscode.Uri ? uri : undefined);
  if (!doc) return;
  const ref = reference instanceof vscode.Uri ? reference.fsPath : typeof reference === "string" ? reference : null;
  const target = config(doc.uri).get<Target>("target", "llvm");
  const name = path.basename(doc.uri.fsPath);
  setStatus("busy", `verifying ${name}…`);
  const r = await runLeirc(`LEIR: verifying ${name}${ref ? ` against ${path.basename(ref)}` : ""}`, doc, verifyArgs(doc.uri.fsPath, ref, target));
  if (r.cancelled) {
    setStatus("idle", "verification cancelled");
    return;
  }
  const s = summarizeVerify(r.stdout, r.stderr, r.exitCode);
  for (const d of s.details) log(`  ${d}`);
  const when = new Date().toLocaleTimeString();
  setStatus(s.outcome, s.short, `${name}${ref ? ` vs ${path.basename(ref)}` : " vs the interpreter"} at ${when}: ${s.message}\nClick to verify again.`);
  const show = s.outcome === "equal" ? vscode.window.showInformationMessage : vscode.window.showErrorMessage;
  void show(`LEIR: ${name}: ${s.message}`, "Show Output").then((c) => c && output.show(true));
}

async function verifyAgainstCommand(uri?: vscode.Uri): Promise<void> {
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    filters: { LEIR: ["leir"] },
    openLabel: "Verify against this reference",
  });
  if (picked?.[0]) await verifyCommand(uri, picked[0]);
}

const REPORT_KEY = "leir.lastSearchReport";

async function optimizeCommand(uri?: vscode.Uri): Promise<void> {
  if (!requireTrust("Optimize (search)")) return;
  const doc = await leirDocument(uri);
  if (!doc) return;
  const c = config(doc.uri);
  const outDir = expandTemplate(c.get<string>("build.outputDirectory", ""), fileVars(doc)) + "-search";
  const s: SearchSettings = {
    target: c.get<Target>("target", "llvm"),
    threads: c.get<number>("threads", 2),
    budget: c.get<number>("search.budget", 32),
    rpcTracker: c.get<string>("rpc.tracker", ""),
    rpcKey: c.get<string>("rpc.key", ""),
    extraArgs: c.get<string[]>("search.extraArgs", []),
  };
  const r = await runLeirc(`LEIR: searching optimizations for ${path.basename(doc.uri.fsPath)}`, doc, searchArgs(doc.uri.fsPath, outDir, s));
  if (r.cancelled) {
    void vscode.window.showInformationMessage("LEIR: search cancelled.");
    return;
  }
  if (r.exitCode !== 0) {
    void vscode.window.showErrorMessage(`LEIR search failed: ${lastErrorLine(r)}`, "Show Output").then((x) => x && output.show(true));
    return;
  }
  const files = writtenFiles(r.stderr);
  const report = files.find((f) => f.endsWith(".html")) ?? findReport(outDir);
  if (report) await extensionContext.workspaceState.update(REPORT_KEY, report);
  const best = files.find((f) => f.endsWith(".leir"));
  const buttons = [...(report ? ["Open report"] : []), ...(best ? ["Open best program"] : []), "Show Output"];
  const choice = await vscode.window.showInformationMessage(`LEIR: search finished; wrote ${files.length} files to ${outDir}`, ...buttons);
  if (choice === "Open report" && report) await openReport(report);
  else if (choice === "Open best program" && best) await vscode.window.showTextDocument(vscode.Uri.file(best));
  else if (choice === "Show Output") output.show(true);
}

function findReport(dir: string): string | undefined {
  try {
    return fs
      .readdirSync(dir)
      .filter((f) => f.endsWith(".html"))
      .map((f) => path.join(dir, f))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
  } catch {
    return undefined; // no such directory: no search ran there
  }
}

async function openReport(file: string): Promise<void> {
  const panel = vscode.window.createWebviewPanel("leirSearchReport", `Search report: ${path.basename(file)}`, vscode.ViewColumn.Beside, {
    enableScripts: false,
    localResourceRoots: [vscode.Uri.file(path.dirname(file))],
  });
  panel.webview.html = fs.readFileSync(file, "utf8");
}

async function openSearchReportCommand(): Promise<void> {
  const known = extensionContext.workspaceState.get<string>(REPORT_KEY);
  if (known && fs.existsSync(known)) return openReport(known);
  const picked = await vscode.window.showOpenDialog({
    canSelectMany: false,
    filters: { "Search report": ["html"] },
    openLabel: "Open search report",
  });
  if (picked?.[0]) await openReport(picked[0].fsPath);
}

/** Asks the server for ranked next steps of the kernel at the cursor and applies the chosen one. */
async function suggestCommand(uriArg?: string, kernelArg?: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const doc = editor?.document;
  if (!doc || doc.languageId !== "leir") {
    void vscode.window.showWarningMessage("LEIR: open a .leir file first.");
    return;
  }
  if (!client || client.state !== State.Running) {
    void vscode.window.showErrorMessage("LEIR: the language server is not running; suggestions come from it.", "Show Output").then((c) => c && output.show(true));
    return;
  }
  const uri = typeof uriArg === "string" ? uriArg : doc.uri.toString();
  const kernel = typeof kernelArg === "string" ? kernelArg : kernelAt(doc.getText(), doc.offsetAt(editor!.selection.active));
  if (!kernel) {
    void vscode.window.showWarningMessage("LEIR: suggestions are per \\kernel; put the cursor inside one.");
    return;
  }
  const c = client;
  const raw = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `LEIR: ranking optimizations for ${kernel}…`, cancellable: true },
    (_p, token) => c.sendRequest(ExecuteCommandRequest.type, { command: "leirc.suggest", arguments: [uri, kernel] }, token),
  );
  const { suggestions, error, note, cancelled } = parseSuggestions(raw);
  if (cancelled) return;
  if (note) {
    // e.g. a model is configured but its key variable is unset: the rows are the cost model's
    log(`suggestions for ${kernel}: ${note}`);
    void vscode.window.showWarningMessage(`LEIR: ${note}`, "Open Settings").then(
      (c) => c && vscode.commands.executeCommand("workbench.action.openSettings", "leir.llm"),
    );
  }
  if (suggestions.length === 0) {
    void vscode.window.showInformationMessage(`LEIR: no suggestion for ${kernel}${error ? `: ${error}` : ""}.`);
    return;
  }
  const pick = await vscode.window.showQuickPick(
    suggestions.map((s) => ({ label: s.title, detail: s.rationale, description: `suggestion · score ${s.score.toFixed(2)}`, s })),
    {
      title: `Suggested optimizations for ${kernel}${note ? " (ranked offline: see the warning)" : ""}`,
      placeHolder: "Pick one to apply it (it is verified against the current version)",
    },
  );
  if (!pick) return;
  const applied = (await c.sendRequest(ExecuteCommandRequest.type, {
    command: "leirc.applyStep",
    arguments: [uri, pick.s.kernel ?? kernel, pick.s.step],
  })) as { applied?: boolean; error?: string } | null;
  if (!applied?.applied) void vscode.window.showErrorMessage(`LEIR: could not apply “${pick.label}”: ${applied?.error ?? "the edit was refused"}`);
}

// ---- activation ------------------------------------------------------------------------------

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionContext = context;
  output = vscode.window.createOutputChannel("LEIR", { log: true });
  statusItem = vscode.window.createStatusBarItem("leir.verification", vscode.StatusBarAlignment.Left, 10);
  statusItem.name = "LEIR verification";
  statusItem.command = "leir.verify";
  setStatus("idle", "not verified");
  fallbackItem = vscode.window.createStatusBarItem("leir.fallbacks", vscode.StatusBarAlignment.Left, 9);
  fallbackItem.name = "LEIR fallbacks";
  fallbackItem.command = "leir.showFallbacks";
  const reg = (id: string, fn: (...a: never[]) => unknown) => context.subscriptions.push(vscode.commands.registerCommand(id, fn));
  reg("leir.build", buildCommand);
  reg("leir.optimize", optimizeCommand);
  reg("leir.verify", verifyCommand);
  reg("leir.verifyAgainst", verifyAgainstCommand);
  reg("leir.showTir", (u?: vscode.Uri) => showCommand("tir", u));
  reg("leir.showCuda", (u?: vscode.Uri) => showCommand("cuda", u));
  reg("leir.suggestOptimization", suggestCommand);
  reg("leir.openSearchReport", openSearchReportCommand);
  reg("leir.restartServer", restartClient);
  reg("leir.showOutput", () => output.show(true));
  reg("leir.showFallbacks", fallbacksCommand);
  context.subscriptions.push(
    output,
    statusItem,
    fallbackItem,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("leir.server")) void restartClient();
      else if (e.affectsConfiguration("leir") && client?.state === State.Running) {
        void client.sendNotification(DidChangeConfigurationNotification.type, configurationChange(settingGetter(), vscode.workspace.isTrusted));
      }
    }),
  );
  // Trust granted: the interpreter may now be the Python extension's, and the server may run kernels.
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void restartClient()));
  await startClient();
}

export async function deactivate(): Promise<void> {
  if (client) await client.stop();
}
