// The extension's `leir.*` settings as the language server reads them. Pure.

/** Reads one `leir.*` setting (e.g. "rpc.tracker"), with its default. */
export type SettingGetter = <T>(key: string, fallback: T) => T;

/**
 * The server (lsp/leirc_lsp, `Settings.KEYS`) takes flat camelCase keys, from
 * initializationOptions or from didChangeConfiguration's `leirc` section. Empty strings mean
 * "not configured" and are sent as null so that the server keeps its own default.
 */
export function serverSettings(get: SettingGetter, trusted = true): Record<string, unknown> {
  const orNull = (v: string) => (v.trim() ? v.trim() : null);
  return {
    // Workspace Trust: without it the server builds, runs and sends nothing (analysis only)
    trusted,
    target: get("target", "llvm"),
    threads: get("threads", 2),
    verifyOnSave: get("verifyOnSave", false),
    rpcTracker: orNull(get("rpc.tracker", "")),
    rpcKey: orNull(get("rpc.key", "")),
    rpcTarget: get("rpc.target", "cuda"),
    llmBaseUrl: orNull(get("llm.baseUrl", "")),
    llmModel: orNull(get("llm.model", "")),
    llmApiKeyEnv: orNull(get("llm.keyEnv", "OPENAI_API_KEY")),
  };
}

/** The payload of workspace/didChangeConfiguration for the server. */
export function configurationChange(get: SettingGetter, trusted = true): { settings: { leirc: Record<string, unknown> } } {
  return { settings: { leirc: serverSettings(get, trusted) } };
}

/** A suggestion as the server's `leirc.suggest` command returns it. */
export interface Suggestion {
  title: string;
  rationale: string;
  score: number;
  step: unknown;
  kernel: string;
  source?: string;
}

/** Reads `leirc.suggest`'s answer defensively: a malformed entry is dropped, not shown half-empty. */
export function parseSuggestions(result: unknown): { suggestions: Suggestion[]; error?: string; note?: string; cancelled: boolean } {
  const r = (typeof result === "object" && result !== null ? result : {}) as Record<string, unknown>;
  const list = Array.isArray(r.suggestions) ? r.suggestions : [];
  const suggestions = list.filter(
    (s): s is Suggestion =>
      typeof s === "object" && s !== null && typeof (s as Suggestion).title === "string" && (s as Suggestion).step !== undefined,
  ).map((s) => ({ ...s, rationale: typeof s.rationale === "string" ? s.rationale : "", score: Number(s.score) || 0 }));
  return {
    suggestions,
    error: typeof r.error === "string" ? r.error : undefined,
    // why a configured model did not rank them (the server's fallback note): shown, never dropped
    note: typeof r.note === "string" && r.note ? r.note : undefined,
    cancelled: r.cancelled === true,
  };
}

/** "✓ equal · 3.2 ms llvm" / "✗ max rel err 3e-02" lens titles carry a verification result. */
export function lensVerification(title: string): "equal" | "different" | null {
  if (title.startsWith("✓")) return "equal";
  if (title.startsWith("✗")) return "different";
  return null;
}
