import assert from "node:assert/strict";
import { test } from "node:test";
import { runProcess } from "../../src/run";

const node = process.execPath;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(cond: () => boolean, limitMs: number): Promise<boolean> {
  const end = Date.now() + limitMs;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return cond();
}

test("captures stdout, stderr (streamed) and the exit code", async () => {
  const chunks: string[] = [];
  const r = await runProcess(node, ["-e", "console.log('out'); console.error('wrote x'); process.exit(3)"], {
    onStderr: (c) => chunks.push(c),
  });
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "out\n");
  assert.equal(r.stderr, "wrote x\n");
  assert.equal(chunks.join(""), "wrote x\n");
  assert.equal(r.cancelled, false);
});

test("a command that does not exist is a spawn error, not an exception", async () => {
  const r = await runProcess("/nonexistent/python3", ["-c", "pass"]);
  assert.equal(r.spawnError, "ENOENT");
  assert.equal(r.exitCode, null);
});

test("cancelling ends the process and the processes it started", async () => {
  // The child starts a grandchild (as leirc starts build workers), prints its pid and waits.
  const script = `
    const { spawn } = require("node:child_process");
    const g = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    console.log(g.pid);
    setInterval(() => {}, 1000);`;
  const abort = new AbortController();
  let grandchild = 0;
  const done = runProcess(node, ["-e", script], {
    signal: abort.signal,
    onStdout: (c) => {
      grandchild = Number.parseInt(c, 10);
      abort.abort();
    },
  });
  const r = await done;
  assert.equal(r.cancelled, true);
  assert.ok(grandchild > 0);
  assert.ok(await until(() => !alive(grandchild), 10_000), `grandchild ${grandchild} survived the cancellation`);
});

test("an already aborted signal stops the process at once", async () => {
  const abort = new AbortController();
  abort.abort();
  const r = await runProcess(node, ["-e", "setInterval(() => {}, 1000)"], { signal: abort.signal });
  assert.equal(r.cancelled, true);
  assert.notEqual(r.signal, null);
});
