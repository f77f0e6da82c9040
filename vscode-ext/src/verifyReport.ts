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
  const failures = Array.isArray(report.failures) ? (report.failures as string[]) : [];
  if (report.equal) {
    const bitwise = report.bitwise === true ? ", bitwise" : "";
    const across = runs !== undefined ? ` on ${runs} runs` : "";
    return {
      outcome: "equal",
      short: report.bitwise === true ? "equal (bitwise)" : "equal",
      message: `Verified equal${bitwise}${across} (${target}; max rel err ${fmtErr(report.max_rel_err)}).`,
      details: [],
    };
  }
  return {
    outcome: "different",
    short: `not equal · max rel err ${fmtErr(report.max_rel_err)}`,
    message: `Not equal (${target}): max rel err ${fmtErr(report.max_rel_err)}, max abs err ${fmtErr(report.max_abs_err)}; ${failures.length} failed checks.`,
    details: failures,
  };
}
