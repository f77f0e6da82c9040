// The extension's command lines and parsers against the real leirc CLI of this checkout, so
// that a change of the CLI's flags or JSON shows up here rather than in the editor.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { leirc, showArgs, verifyArgs, writtenFiles } from "../../src/cli";
import { runProcess } from "../../src/run";
import { summarizeVerify } from "../../src/verifyReport";
import { LEIR_PYTHON, NO_PYTHON_REASON } from "./helpers";

const skip = LEIR_PYTHON ? false : NO_PYTHON_REASON;
const py = { command: LEIR_PYTHON, args: [], source: "setting" as const };

const relu = (zero: string) =>
  `\\kernel r(A: f32[8]) -> (C: f32[8]) {\n  L^{8}_{i=0} [ C^{f32,g}_{i} = max(A^{f32,g}_{i}, ${zero}); ];\n}\n`;

function scratch(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "leir-ext-test-"));
  for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}

async function cli(args: string[], cwd: string) {
  const inv = leirc(py, args);
  return runProcess(inv.command, inv.args, { cwd });
}

test("verify --json of two different programs is read as a mismatch", { skip }, async () => {
  const dir = scratch({ "a.leir": relu("0.0"), "b.leir": relu("0.5") });
  try {
    const r = await cli(verifyArgs("a.leir", "b.leir", "interp"), dir);
    const s = summarizeVerify(r.stdout, r.stderr, r.exitCode);
    assert.equal(r.exitCode, 1);
    assert.equal(s.outcome, "different", s.message);
    assert.ok(s.details.length > 0);
    const same = await cli(verifyArgs("a.leir", "a.leir", "interp"), dir);
    assert.equal(summarizeVerify(same.stdout, same.stderr, same.exitCode).outcome, "equal");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("verify --json of a program with errors is read as an error with its diagnostic", { skip }, async () => {
  const dir = scratch({ "bad.leir": relu("Q^{f32,g}_{i}") });
  try {
    const r = await cli(verifyArgs("bad.leir", null, "interp"), dir);
    const s = summarizeVerify(r.stdout, r.stderr, r.exitCode);
    assert.equal(s.outcome, "error");
    assert.match(s.details.join("\n"), /bad\.leir:2:\d+: error\[E\d+\]/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("Show TIR's command line writes a TIR file and names it on stderr", { skip }, async () => {
  const dir = scratch({ "k.leir": relu("0.0") });
  try {
    const r = await cli(showArgs("k.leir", path.join(dir, "out"), "tir", { target: "llvm", threads: 1, optLevel: "0" }), dir);
    assert.equal(r.exitCode, 0, r.stderr);
    const tir = writtenFiles(r.stderr).find((f) => f.endsWith(".tir.py"));
    assert.ok(tir, r.stderr);
    assert.match(fs.readFileSync(path.resolve(dir, tir), "utf8"), /T\.prim_func|prim_func/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
