import assert from "node:assert/strict";
import { test } from "node:test";
import { configurationChange, lensVerification, parseSuggestions, serverSettings } from "../../src/settings";

const getter = (values: Record<string, unknown>) => <T>(key: string, fallback: T): T => (key in values ? (values[key] as T) : fallback);

test("settings go to the server under its own flat keys", () => {
  const s = serverSettings(getter({ target: "cuda", threads: 8, verifyOnSave: true, "rpc.tracker": "127.0.0.1:9190", "llm.model": "m" }));
  assert.deepEqual(s, {
    trusted: true,
    target: "cuda",
    threads: 8,
    verifyOnSave: true,
    rpcTracker: "127.0.0.1:9190",
    rpcKey: null,
    rpcTarget: "cuda",
    llmBaseUrl: null,
    llmModel: "m",
    llmApiKeyEnv: "OPENAI_API_KEY",
  });
});

test("a configuration change is sent in the server's `leirc` section", () => {
  const c = configurationChange(getter({ threads: 3 }));
  assert.equal(c.settings.leirc.threads, 3);
  assert.equal(c.settings.leirc.target, "llvm");
});

test("an untrusted folder is said to the server, at start-up and on every change", () => {
  assert.equal(serverSettings(getter({}), false).trusted, false);
  assert.equal(configurationChange(getter({}), false).settings.leirc.trusted, false);
  assert.equal(configurationChange(getter({})).settings.leirc.trusted, true);
});

test("blank strings are not configured values", () => {
  assert.equal(serverSettings(getter({ "llm.baseUrl": "   " })).llmBaseUrl, null);
});

test("suggestions are read defensively", () => {
  const r = parseSuggestions({
    suggestions: [
      { title: "Apply loop tiling (i, j by 32×32)", rationale: "reuse", score: 0.8, step: { strategy: "loop_tiling" }, kernel: "k" },
      { rationale: "no title", step: {} },
      { title: "no step" },
      { title: "no rationale", step: { strategy: "x" }, kernel: "k", score: "bad" },
    ],
    cancelled: false,
  });
  assert.deepEqual(r.suggestions.map((s) => s.title), ["Apply loop tiling (i, j by 32×32)", "no rationale"]);
  assert.equal(r.suggestions[1].score, 0);
  assert.equal(r.suggestions[1].rationale, "");
  assert.deepEqual(parseSuggestions(null), { suggestions: [], error: undefined, note: undefined, cancelled: false });
  assert.equal(parseSuggestions({ suggestions: [], note: "the environment variable K is not set; ranked offline" }).note,
    "the environment variable K is not set; ranked offline");
  assert.equal(parseSuggestions({ suggestions: [], error: "no site" }).error, "no site");
});

test("lens titles with a verification result are recognized", () => {
  assert.equal(lensVerification("✓ equal · 3.2 ms llvm · 12× vs before"), "equal");
  assert.equal(lensVerification("✗ max rel err 3.0e-02"), "different");
  assert.equal(lensVerification("▶ Verify and time (llvm)"), null);
  assert.equal(lensVerification("💡 Suggest optimization"), null);
});
