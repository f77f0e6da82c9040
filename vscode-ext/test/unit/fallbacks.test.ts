import assert from "node:assert/strict";
import { test } from "node:test";
import { parseStatus, statusText, statusTooltip, toNotify } from "../../src/fallbacks";

const status = {
  fallbacks: [
    { what: "model", message: "suggestions are ranked offline (cost model): the environment variable K (key_env) is not set", setting: "leir.llm.keyEnv" },
    { what: "tracker", message: "Run on GPU is off: no RPC tracker is listening at 127.0.0.1:9 (connection refused)", setting: "leir.rpc.tracker" },
    { nonsense: true },
  ],
  trusted: true,
};

test("the server's leirc/status is read defensively", () => {
  const f = parseStatus(status);
  assert.deepEqual(f.map((x) => x.what), ["model", "tracker"]);
  assert.deepEqual(parseStatus(null), []);
  assert.deepEqual(parseStatus({ fallbacks: "no" }), []);
});

test("the status bar names what is not used; its tooltip says why, whole, with the setting", () => {
  const f = parseStatus(status);
  assert.equal(statusText(f), "$(warning) LEIR: no model, no tracker");
  assert.equal(statusText([]), "");
  const tip = statusTooltip(f);
  assert.match(tip, /no model: suggestions are ranked offline .* is not set \(setting: leir\.llm\.keyEnv\)/);
  assert.match(tip, /connection refused\) \(setting: leir\.rpc\.tracker\)/);
});

test("each distinct reason is notified once per session", () => {
  const shown = new Set<string>();
  const f = parseStatus(status);
  assert.equal(toNotify(f, shown).length, 2);
  assert.equal(toNotify(f, shown).length, 0);
  const changed = [{ ...f[1], message: "Run on GPU is off: the RPC tracker at 127.0.0.1:9 has no device for key 'a100'" }];
  assert.deepEqual(toNotify(changed, shown).map((x) => x.what), ["tracker"]);
});
