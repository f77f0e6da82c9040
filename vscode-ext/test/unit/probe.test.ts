import assert from "node:assert/strict";
import { test } from "node:test";
import { PROBE_SCRIPT, installCommand, judgeProbe } from "../../src/probe";
import { runProcess } from "../../src/run";
import { LEIR_PYTHON, NO_PYTHON_REASON } from "./helpers";

const py = { command: "/venv/bin/python", args: [], source: "setting" as const };
const line = (o: object) => ({ exitCode: 0, stdout: JSON.stringify(o) + "\n", stderr: "" });

test("a missing interpreter asks for the pythonPath setting", () => {
  const v = judgeProbe(py, { spawnError: "ENOENT", exitCode: null, stdout: "", stderr: "" });
  assert.equal(v.ok, false);
  assert.ok(!v.ok && v.problem === "no-python" && /leir\.server\.pythonPath/.test(v.message));
});

test("a Python without leirc gets the pip command for that interpreter", () => {
  const v = judgeProbe(py, line({ python: "3.11.7", executable: "/venv/bin/python", leirc_error: "ModuleNotFoundError: No module named 'leirc'" }));
  assert.ok(!v.ok && v.problem === "no-leirc");
  assert.ok(!v.ok && v.installCommand === '/venv/bin/python -m pip install "leirc[lsp]"');
  assert.ok(!v.ok && v.message.includes("Install it with: /venv/bin/python -m pip install"));
});

test("leirc without the language server says which part is missing", () => {
  const v = judgeProbe(py, line({ python: "3.11.7", executable: "/venv/bin/python", leirc: "0.1.0", lsp_command: true, lsp_module: true, pygls: false }));
  assert.ok(!v.ok && v.problem === "no-lsp" && /lacks pygls/.test(v.message));
  const w = judgeProbe(py, line({ python: "3.11.7", leirc: "0.1.0", lsp_command: false, lsp_module: false, pygls: true }));
  assert.ok(!w.ok && /has no language server/.test(w.message));
});

test("everything present is ok, started as `leirc lsp`, or as its module when the CLI lacks the command", () => {
  const v = judgeProbe(py, line({ python: "3.11.7", leirc: "0.1.0", lsp_command: true, lsp_module: true, pygls: true }));
  assert.deepEqual(v, { ok: true, leircVersion: "0.1.0", python: "3.11.7", entry: "leirc-lsp" });
  const m = judgeProbe(py, line({ python: "3.11.7", leirc: "0.1.0", lsp_command: false, lsp_module: true, pygls: true }));
  assert.ok(m.ok && m.entry === "module");
});

test("an interpreter that crashes is reported with its last stderr line", () => {
  const v = judgeProbe(py, { exitCode: 1, stdout: "", stderr: "Fatal Python error: init\n" });
  assert.ok(!v.ok && v.problem === "broken" && /exit 1\): Fatal Python error/.test(v.message));
});

test("install commands quote interpreter paths with spaces", () => {
  assert.equal(installCommand({ command: "/my py/python", args: [], source: "setting" }), '"/my py/python" -m pip install "leirc[lsp]"');
});

test("the probe script runs on a real interpreter without leirc on its path", async () => {
  // -I: isolated mode, so the user's site-packages (where leirc may be) are not seen.
  const python = { command: LEIR_PYTHON || "python3", args: ["-I", "-S"], source: "default" as const };
  const r = await runProcess(python.command, [...python.args, "-c", PROBE_SCRIPT]);
  const v = judgeProbe(python, r);
  assert.ok(!v.ok && v.problem === "no-leirc", JSON.stringify(v));
});

test("the probe script finds leirc in the project's Python", { skip: LEIR_PYTHON ? false : NO_PYTHON_REASON }, async () => {
  const python = { command: LEIR_PYTHON, args: [], source: "setting" as const };
  const v = judgeProbe(python, await runProcess(LEIR_PYTHON, ["-c", PROBE_SCRIPT]));
  // `leirc lsp` may be absent from a build without the language server: then it must say so.
  assert.ok(v.ok || v.problem === "no-lsp", JSON.stringify(v));
});
