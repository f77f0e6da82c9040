import assert from "node:assert/strict";
import { test } from "node:test";
import { CrashPolicy } from "../../src/crashPolicy";

test("restarts until the fifth crash within three minutes, then stops", () => {
  const p = new CrashPolicy(5, 180_000);
  const decisions = [0, 10_000, 20_000, 30_000, 40_000].map((t) => p.onCrash(t));
  assert.deepEqual(decisions.map((d) => d.restart), [true, true, true, true, false]);
  assert.equal(decisions[4].count, 5);
});

test("crashes older than the window are forgotten", () => {
  const p = new CrashPolicy(3, 1000);
  assert.ok(p.onCrash(0).restart);
  assert.ok(p.onCrash(500).restart);
  const late = p.onCrash(1600); // the first two are out of the window
  assert.deepEqual(late, { restart: true, count: 1 });
});

test("reset (a manual restart) clears the history", () => {
  const p = new CrashPolicy(2, 1000);
  p.onCrash(0);
  assert.equal(p.onCrash(1).restart, false);
  p.reset();
  assert.equal(p.onCrash(2).restart, true);
});
