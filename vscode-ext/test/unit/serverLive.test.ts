// The language server started exactly as the extension starts it (probe, then the command line
// for the entry the probe found) answers an LSP initialize over stdio.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { safeEnv, serverInvocation } from "../../src/cli";
import { PROBE_SCRIPT, judgeProbe } from "../../src/probe";
import { runProcess } from "../../src/run";
import { LEIR_PYTHON, NO_PYTHON_REASON } from "./helpers";

function frame(msg: object): string {
  const body = JSON.stringify(msg);
  return `Content-Length: ${Buffer.byteLength(body, "utf8")}\r\n\r\n${body}`;
}

/** Reads LSP messages from a byte stream. */
class Reader {
  private buf = Buffer.alloc(0);
  private waiters: ((m: Record<string, unknown>) => void)[] = [];
  private queue: Record<string, unknown>[] = [];
  push(chunk: Buffer): void {
    this.buf = Buffer.concat([this.buf, chunk]);
    for (;;) {
      const sep = this.buf.indexOf("\r\n\r\n");
      if (sep < 0) return;
      const m = /Content-Length: (\d+)/i.exec(this.buf.subarray(0, sep).toString("ascii"));
      if (!m) throw new Error(`bad header ${this.buf.subarray(0, sep)}`);
      const len = Number(m[1]);
      if (this.buf.length < sep + 4 + len) return;
      const msg = JSON.parse(this.buf.subarray(sep + 4, sep + 4 + len).toString("utf8"));
      this.buf = this.buf.subarray(sep + 4 + len);
      const w = this.waiters.shift();
      if (w) w(msg);
      else this.queue.push(msg);
    }
  }
  next(): Promise<Record<string, unknown>> {
    const q = this.queue.shift();
    return q ? Promise.resolve(q) : new Promise((r) => this.waiters.push(r));
  }
}

/** A folder whose modules shadow the standard library and leirc; each notes its import in the returned marker. */
function shadowingFolder(): { dir: string; marker: string } {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), "leir-shadow-"));
  const dir = path.join(base, "ws");
  fs.mkdirSync(dir);
  const marker = path.join(base, "imported.txt");
  for (const name of ["random", "typing", "types", "copy", "inspect", "logging", "queue", "signal", "select", "token", "numbers", "json", "re", "enum", "functools", "leirc", "leirc_lsp", "pygls"]) {
    fs.writeFileSync(path.join(dir, `${name}.py`), `open(${JSON.stringify(marker)}, 'a').write(__name__ + '\\n')\nraise ImportError('imported from the workspace')\n`);
  }
  return { dir, marker };
}

test("the extension's server command line starts a server that answers initialize, even from a folder that shadows the standard library", { skip: LEIR_PYTHON ? false : NO_PYTHON_REASON }, async () => {
  const python = { command: LEIR_PYTHON, args: [], source: "setting" as const };
  const { dir, marker } = shadowingFolder();
  const verdict = judgeProbe(python, await runProcess(LEIR_PYTHON, ["-c", PROBE_SCRIPT], { cwd: dir, env: safeEnv(process.env) }));
  assert.ok(verdict.ok, JSON.stringify(verdict));
  const inv = serverInvocation(python, verdict.entry, []);
  // the extension starts it from a directory of its own; the workspace as working directory is the worst case
  const p = spawn(inv.command, inv.args, { stdio: ["pipe", "pipe", "pipe"], cwd: dir, env: safeEnv(process.env) });
  let stderr = "";
  p.stderr.on("data", (d) => (stderr += d));
  const reader = new Reader();
  p.stdout.on("data", (d: Buffer) => reader.push(d));
  const exited = new Promise<number | null>((r) => p.on("close", (code) => r(code)));
  try {
    p.stdin.write(frame({ jsonrpc: "2.0", id: 1, method: "initialize", params: { processId: process.pid, rootUri: null, capabilities: {}, initializationOptions: { target: "llvm", threads: 2 } } }));
    let reply: Record<string, unknown>;
    do reply = await Promise.race([reader.next(), exited.then((c) => { throw new Error(`server exited (${c}): ${stderr}`); })]);
    while (reply.id !== 1);
    const caps = (reply.result as { capabilities: Record<string, unknown> }).capabilities;
    assert.ok(caps.hoverProvider, JSON.stringify(caps));
    assert.ok(caps.codeActionProvider);
    const commands = (caps.executeCommandProvider as { commands: string[] }).commands;
    assert.ok(commands.includes("leirc.suggest") && commands.includes("leirc.applyStep"), JSON.stringify(commands));
    p.stdin.write(frame({ jsonrpc: "2.0", id: 2, method: "shutdown" }));
    p.stdin.write(frame({ jsonrpc: "2.0", method: "exit" }));
    assert.equal(await exited, 0, stderr);
    assert.ok(!fs.existsSync(marker), `imported from the workspace: ${fs.existsSync(marker) ? fs.readFileSync(marker, "utf8") : ""}`);
  } finally {
    p.kill();
  }
});
