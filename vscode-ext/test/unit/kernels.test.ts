import assert from "node:assert/strict";
import { test } from "node:test";
import { blankComments, kernelAt, kernelHeaders } from "../../src/kernels";

const TEXT = [
  "% \\kernel commented(A: f32) -> (B: f32) {}",
  "\\kernel first(A: f32[4]) -> (C: f32[4]) {",
  "  L^{4}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i}%3; ];",
  "}",
  "\\kernel second_one(A: f32[4]) -> (C: f32[4]) {",
  "  L^{4}_{i=0} [ C^{f32,g}_{i} = A^{f32,g}_{i}; ];",
  "}",
].join("\n");

test("headers in comments are not kernels", () => {
  assert.deepEqual(kernelHeaders(TEXT).map((h) => h.name), ["first", "second_one"]);
});

test("the kernel at the cursor is the last header before it", () => {
  assert.equal(kernelAt(TEXT, TEXT.indexOf("A^{f32,g}_{i}%3")), "first");
  assert.equal(kernelAt(TEXT, TEXT.lastIndexOf("L^{4}")), "second_one");
  assert.equal(kernelAt(TEXT, TEXT.length), "second_one");
  assert.equal(kernelAt(TEXT, 0), "first"); // above every header
  assert.equal(kernelAt("L^{4}_{i=0}[C_{i}=1;];", 3), null);
});

test("blanking comments keeps offsets and the modulo operator", () => {
  const b = blankComments(TEXT);
  assert.equal(b.length, TEXT.length);
  assert.ok(b.includes("A^{f32,g}_{i}%3"));
  assert.ok(!b.includes("commented"));
});
