// What the language server does not use and why (its `leirc/status` notification). Pure.

/** One fallback: the model, the GPU or the tracker is not used. */
export interface Fallback {
  what: "model" | "gpu" | "tracker" | string;
  /** the whole reason, with the setting to change */
  message: string;
  /** the setting that changes it, e.g. `leir.llm.keyEnv` */
  setting: string;
}

/** Reads the notification's params defensively: malformed entries are dropped. */
export function parseStatus(params: unknown): Fallback[] {
  const p = (typeof params === "object" && params !== null ? params : {}) as Record<string, unknown>;
  const list = Array.isArray(p.fallbacks) ? p.fallbacks : [];
  return list.filter(
    (f): f is Fallback =>
      typeof f === "object" && f !== null && typeof (f as Fallback).what === "string" && typeof (f as Fallback).message === "string",
  ).map((f) => ({ what: f.what, message: f.message, setting: typeof f.setting === "string" ? f.setting : "leir" }));
}

const NAMES: Record<string, string> = { model: "no model", gpu: "no GPU", tracker: "no tracker" };

/** The status-bar text: empty when nothing falls back. */
export function statusText(fallbacks: Fallback[]): string {
  if (fallbacks.length === 0) return "";
  const names = fallbacks.map((f) => NAMES[f.what] ?? `no ${f.what}`);
  return `$(warning) LEIR: ${names.join(", ")}`;
}

/** The status-bar tooltip: every reason whole, with its setting. */
export function statusTooltip(fallbacks: Fallback[]): string {
  return fallbacks.map((f) => `${NAMES[f.what] ?? f.what}: ${f.message} (setting: ${f.setting})`).join("\n\n") +
    "\n\nClick to open the settings.";
}

/**
 * The fallbacks not notified yet in this session (each distinct reason once); marks them as
 * notified in `shown`.
 */
export function toNotify(fallbacks: Fallback[], shown: Set<string>): Fallback[] {
  const out: Fallback[] = [];
  for (const f of fallbacks) {
    const key = `${f.what}\u0000${f.message}`;
    if (!shown.has(key)) {
      shown.add(key);
      out.push(f);
    }
  }
  return out;
}
