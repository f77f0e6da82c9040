// Reading `leirc verify --json` into what the status bar and the messages show. Pure.

export type VerifyOutcome = "equal" | "different" | "error";

export interface VerifySummary {
  outcome: VerifyOutcome;
  /** short, for the status bar */
  short: string;
  /** one sentence, for a notification */
  message: string;
  /** details (failures, diagnostics), for the output channel */
  details: string[];
}

interface Diagnostic {
  file?: string;
  line?: number;
  col?: number;
  code?: string;
  severity?: string;
  message?: string;
}

function fmtErr(x: unknown): string {
  if (typeof x !== "number" || !Number.isFinite(x)) return String(x);
  if (x !== 0 && Math.abs(x) < 1e-3) return x.toExponential(1).replace(/\.0e/, "e");
  return String(Number(x.toPrecision(2)));
}

function diagLine(d: Diagnostic): string {
  const where = [d.file, d.line, d.col].filter((p) => p !== undefined && p !== null).join(":");
  const code = d.code ? `[${d.code}]` : "";
  return `${where}: ${d.severity ?? "error"}${code}: ${d.message ?? ""}`;
}

/** The JSON object in stdout (leirc prints one; warnings may precede it on stderr only). */
export function extractJson(stdout: string): unknown {
  const start = stdout.indexOf("{");
  const end = stdout.lastIndexOf("}");
  if (start < 0 || end < start) throw new Error("no JSON object in the output");
  return JSON.parse(stdout.slice(start, end + 1));
}

export function summarizeVerify(stdout: string, stderr: string, exitCode: number | null): VerifySummary {
  let report: Record<string, unknown>;
  try {
    const parsed = extractJson(stdout);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Error("not an object");
    report = parsed as Record<string, unknown>;
  } catch (e) {
    const tail = stderr.trim().split(/\r?\n/).slice(-5);
    return {
      outcome: "error",
      short: "verify failed",
      message: `leirc verify gave no report (exit ${exitCode}): ${tail[tail.length - 1] ?? String(e)}`,
      details: tail,
    };
  }
  const diags = Array.isArray(report.diagnostics) ? (report.diagnostics as Diagnostic[]) : [];
  const error = report.error as { kind?: string; message?: string } | null | undefined;
  if (typeof report.equal !== "boolean") {
    const msg = error?.message ?? (diags[0]?.message as string | undefined) ?? "no verification result";
    return {
      outcome: "error",
      short: error?.kind === "diagnostics" ? "errors" : "verify error",
      message: `Not verified: ${msg}`,
      details: diags.map(diagLine),
    };
  }
  const target = typeof report.target === "string" ? report.target : "";
  const runs = typeof report.runs === "number" ? report.runs : undefined;
  const probeRuns = typeof report.probe_runs === "number" ? report.probe_runs : 0;
  const failures = Array.isArray(report.failures) ? (report.failures as string[]) : [];
  const seeds = Array.isArray(report.seeds) ? (report.seeds as unknown[]).join(",") : "";
  const dists = Array.isArray(report.dists) ? (report.dists as unknown[]).join(", ") : "";
  const probes = Array.isArray(report.probes) && report.probes.length ? `; probes ${(report.probes as unknown[]).join(", ")}` : "; no probes";
  const grid = runs !== undefined ? `${runs + probeRuns} runs (seeds ${seeds} × ${dists}${probes})` : "";
  const rule = typeof report.tolerance === "string" && report.tolerance ? ` (${report.tolerance} tolerance)` : "";
  // a comparison of a program with the interpreter or with another program is tested, not proven
  const evidence = report.evidence === "proven" ? "proven (legal by construction; the runs confirm the compiler)" : "tested (the runs are the only evidence)";
  const elementwise = `element-wise max rel err ${fmtErr(report.max_rel_err)}, not the criterion`;
  if (report.equal) {
    const decided = report.bitwise === true ? "bitwise equal" : `normwise relative error ${fmtErr(report.norm_rel_err)} within its bound${rule}`;
    return {
      outcome: "equal",
      short: report.bitwise === true ? "equal (bitwise)" : `equal (normwise ${fmtErr(report.norm_rel_err)})`,
      message: `Verified equal (${target}): ${decided}; ${grid}; ${evidence}.`,
      details: [elementwise],
    };
  }
  return {
    outcome: "different",
    short: `not equal · ${criterion(failures, report.norm_rel_err)}`,
    message: `Not equal (${target}): ${failures[0] ?? `normwise relative error ${fmtErr(report.norm_rel_err)}`}; ${failures.length} failed checks; ${grid}.`,
    details: [...failures, elementwise],
  };
}

/** The criterion that decided a mismatch, in a few words (never the element-wise max rel err). */
export function criterion(failures: string[], norm: unknown): string {
  const first = failures[0] ?? "";
  let m = /normwise relative error (\S+) > (\S+)/.exec(first);
  if (m) return `normwise ${fmtErr(Number(m[1]))} > ${fmtErr(Number(m[2].replace(/[;,)]$/, "")))}`;
  m = /(\d+) of (\d+) elements outside/.exec(first);
  if (m) return `${m[1]} of ${m[2]} elements outside the bound`;
  return `normwise ${fmtErr(norm)}`;
}
