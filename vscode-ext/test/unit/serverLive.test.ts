// The language server started exactly as the extension starts it (probe, then the command line
// for the entry the probe found) answers an LSP initialize over stdio.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { serverInvocation } from "../../src/cli";
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

test("the extension's server command line starts a server that answers initialize", { skip: LEIR_PYTHON ? false : NO_PYTHON_REASON }, async () => {
  const python = { command: LEIR_PYTHON, args: [], source: "setting" as const };
  const verdict = judgeProbe(python, await runProcess(LEIR_PYTHON, ["-c", PROBE_SCRIPT]));
  assert.ok(verdict.ok, JSON.stringify(verdict));
  const inv = serverInvocation(python, verdict.entry, []);
  const p = spawn(inv.command, inv.args, { stdio: ["pipe", "pipe", "pipe"] });
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
  } finally {
    p.kill();
  }
});
