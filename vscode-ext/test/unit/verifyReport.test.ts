import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { extractJson, summarizeVerify } from "../../src/verifyReport";
import { EXT_ROOT } from "./helpers";

// Recorded from real `leirc verify --json` runs (stdlib/gemv.leir on llvm; two relu kernels that
// differ, with -t interp; a kernel with E018; a missing reference file).
const fixture = (name: string) => fs.readFileSync(path.join(EXT_ROOT, "test", "unit", "fixtures", name), "utf8");

test("an equal verification is summarized with its target and error", () => {
  const s = summarizeVerify(fixture("verify-equal.json"), "", 0);
  assert.equal(s.outcome, "equal");
  assert.equal(s.short, "equal");
  assert.match(s.message, /Verified equal on 9 runs \(llvm; max rel err 0\.0022\)/);
});

test("a mismatch reports the max relative error and lists the failed checks", () => {
  const s = summarizeVerify(fixture("verify-different.json"), "", 1);
  assert.equal(s.outcome, "different");
  assert.equal(s.short, "not equal · max rel err 1");
  assert.match(s.message, /max abs err 0\.5; 2 failed checks/);
  assert.equal(s.details.length, 2);
  assert.match(s.details[0], /mismatch at \(3\)/);
});

test("program errors come back as diagnostics with file, line, column and code", () => {
  const s = summarizeVerify(fixture("verify-diagnostics.json"), "", 1);
  assert.equal(s.outcome, "error");
  assert.equal(s.short, "errors");
  assert.match(s.message, /read before any statement writes it/);
  assert.deepEqual(s.details, ["bad.leir:2:33: error[E018]: 'Q' is read before any statement writes it"]);
});

test("an I/O error is an error, not a mismatch", () => {
  const s = summarizeVerify(fixture("verify-io.json"), "", 2);
  assert.equal(s.outcome, "error");
  assert.match(s.message, /no such file/);
});

test("output that is not a JSON report says so and quotes stderr", () => {
  const s = summarizeVerify("", "Traceback...\nModuleNotFoundError: No module named 'leirc'\n", 1);
  assert.equal(s.outcome, "error");
  assert.match(s.message, /exit 1\): ModuleNotFoundError: No module named 'leirc'/);
  assert.throws(() => extractJson("no json here"), /no JSON object/);
});

test("small errors are written with an exponent", () => {
  const small = fixture("verify-equal.json").replace('"max_rel_err": 0.002183788899063943', '"max_rel_err": 5.98e-6');
  assert.match(summarizeVerify(small, "", 0).message, /max rel err 6e-6\)/);
});

test("a report printed after other stdout text is still found", () => {
  const s = summarizeVerify("note: something\n" + fixture("verify-equal.json"), "", 0);
  assert.equal(s.outcome, "equal");
});
