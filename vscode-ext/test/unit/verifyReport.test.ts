import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { extractJson, summarizeVerify } from "../../src/verifyReport";
import { EXT_ROOT } from "./helpers";

// Recorded from real `leirc verify --json` runs (stdlib/gemv.leir on llvm; two relu kernels that
// differ, with -t interp; a kernel with E018; a missing reference file).
const fixture = (name: string) => fs.readFileSync(path.join(EXT_ROOT, "test", "unit", "fixtures", name), "utf8");

test("an equal verification shows the criterion that decided, the runs, and that it is tested", () => {
  const s = summarizeVerify(fixture("verify-equal.json"), "", 0);
  assert.equal(s.outcome, "equal");
  assert.equal(s.short, "equal (normwise 6e-6)");
  assert.equal(
    s.message,
    "Verified equal (llvm): normwise relative error 6e-6 within its bound (arithmetic tolerance); 12 runs (seeds 0,1,2 × uniform, normal, signed; probes logits, mixed, special); tested (the runs are the only evidence).",
  );
  // the element-wise maximum (0.0022, read as 0.2 %) is not what decided: only in the details
  assert.doesNotMatch(s.message, /max rel err/);
  assert.match(s.details[0], /element-wise max rel err 0\.0022, not the criterion/);
  const proven = summarizeVerify(JSON.stringify({ ...JSON.parse(fixture("verify-equal.json")), evidence: "proven" }), "", 0);
  assert.match(proven.message, /proven \(legal by construction/);
});

test("a mismatch reports the failed criterion and lists the failed checks", () => {
  const s = summarizeVerify(fixture("verify-different.json"), "", 1);
  assert.equal(s.outcome, "different");
  assert.equal(s.short, "not equal · 3 of 8 elements outside the bound");
  assert.match(s.message, /Not equal \(interp\): output C: mismatch at \(3\).*; 2 failed checks; 9 runs/);
  assert.equal(s.details.length, 3);
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
  assert.match(summarizeVerify(small, "", 0).details[0], /max rel err 6e-6,/);
});

test("a report printed after other stdout text is still found", () => {
  const s = summarizeVerify("note: something\n" + fixture("verify-equal.json"), "", 0);
  assert.equal(s.outcome, "equal");
});
