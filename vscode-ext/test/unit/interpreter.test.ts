import assert from "node:assert/strict";
import { test } from "node:test";
import { describeInterpreter, resolveInterpreter, splitCommandLine } from "../../src/interpreter";

test("the setting wins over the Python extension and the default", () => {
  const it = resolveInterpreter({ setting: "/opt/py/bin/python", pythonExtension: ["/usr/bin/python3.12"] });
  assert.deepEqual(it, { command: "/opt/py/bin/python", args: [], source: "setting" });
});

test("a setting may carry interpreter arguments and quoted paths", () => {
  const it = resolveInterpreter({ setting: '"/opt/my py/bin/python" -X utf8' });
  assert.equal(it.command, "/opt/my py/bin/python");
  assert.deepEqual(it.args, ["-X", "utf8"]);
});

test("${workspaceFolder} and ~ are expanded in the interpreter path only", () => {
  const it = resolveInterpreter({
    setting: "${workspaceFolder}/.venv/bin/python -c ${workspaceFolder}",
    workspaceFolder: "/ws",
    home: "/home/u",
  });
  assert.equal(it.command, "/ws/.venv/bin/python");
  assert.deepEqual(it.args, ["-c", "${workspaceFolder}"]);
  assert.equal(resolveInterpreter({ setting: "~/venv/bin/python", home: "/home/u" }).command, "/home/u/venv/bin/python");
});

test("an empty or blank setting falls through to the Python extension's interpreter", () => {
  for (const setting of ["", "   ", null, undefined]) {
    const it = resolveInterpreter({ setting, pythonExtension: ["/usr/bin/conda", "run", "-n", "x", "python"] });
    assert.equal(it.source, "python-extension");
    assert.equal(it.command, "/usr/bin/conda");
    assert.deepEqual(it.args, ["run", "-n", "x", "python"]);
  }
});

test("without setting or Python extension it is python3 (or the given fallback)", () => {
  assert.deepEqual(resolveInterpreter({}), { command: "python3", args: [], source: "default" });
  assert.deepEqual(resolveInterpreter({ pythonExtension: [] }).source, "default");
  assert.equal(resolveInterpreter({ fallback: "python" }).command, "python");
});

test("splitCommandLine keeps empty quoted arguments and collapses spaces", () => {
  assert.deepEqual(splitCommandLine('  a   "b c"  "" d '), ["a", "b c", "", "d"]);
});

test("describeInterpreter says where the choice came from", () => {
  assert.match(describeInterpreter(resolveInterpreter({})), /python3 \(the default; set leir.server.pythonPath/);
  assert.match(describeInterpreter(resolveInterpreter({ setting: "/x/python" })), /from the setting/);
});

test("an untrusted folder's own interpreter is never used", () => {
  const venv = resolveInterpreter({ setting: "${workspaceFolder}/.venv/bin/python", workspaceFolder: "/ws", trusted: false });
  assert.deepEqual(venv, { command: "python3", args: [], source: "untrusted-default" });
  assert.equal(resolveInterpreter({ setting: "/ws/env/bin/python", workspaceFolder: "/ws", trusted: false }).source, "untrusted-default");
  assert.equal(resolveInterpreter({ setting: "env/bin/python", workspaceFolder: "/ws", trusted: false }).source, "untrusted-default");
  // the Python extension may have chosen the folder's virtual environment: not asked
  assert.equal(resolveInterpreter({ pythonExtension: ["/ws/.venv/bin/python"], trusted: false }).command, "python3");
  // the user's own interpreter outside the folder is fine; trusted folders are unchanged
  assert.equal(resolveInterpreter({ setting: "/opt/py/bin/python", workspaceFolder: "/ws", trusted: false }).source, "setting");
  assert.equal(resolveInterpreter({ setting: "/ws/env/bin/python", workspaceFolder: "/ws", trusted: true }).source, "setting");
});
