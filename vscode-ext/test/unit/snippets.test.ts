// The snippets expand (placeholders replaced by their defaults, choices by their first option)
// to LEIR that leirc checks clean.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { leirc } from "../../src/cli";
import { runProcess } from "../../src/run";
import { EXT_ROOT, LEIR_PYTHON, NO_PYTHON_REASON } from "./helpers";

interface Snippet {
  prefix: string | string[];
  body: string | string[];
  description: string;
}
const snippets: Record<string, Snippet> = JSON.parse(fs.readFileSync(path.join(EXT_ROOT, "snippets", "leir.json"), "utf8"));

/** Expands a snippet the way VS Code would with every placeholder left at its default. */
export function expand(body: string): string {
  const values = new Map<string, string>();
  // ${N|a,b|} choices and ${N:default} placeholders define the value of $N; mirrors reuse it.
  let text = body.replace(/\$\{(\d+)\|([^|]*)\|\}/g, (_m, n: string, opts: string) => {
    const v = opts.split(",")[0];
    values.set(n, v);
    return v;
  });
  for (let i = 0; i < 5; i++) {
    text = text.replace(/\$\{(\d+):([^${}]*)\}/g, (_m, n: string, def: string) => {
      values.set(n, def);
      return def;
    });
  }
  text = text.replace(/\$\{(\d+)\}|\$(\d+)/g, (_m, a: string, b: string) => values.get(a ?? b) ?? "");
  return text;
}

function bodyOf(s: Snippet): string {
  return Array.isArray(s.body) ? s.body.join("\n") : s.body;
}

test("every snippet expands to balanced brackets with no placeholder left", () => {
  assert.ok(Object.keys(snippets).length >= 5);
  for (const [name, s] of Object.entries(snippets)) {
    const text = expand(bodyOf(s));
    assert.ok(!/\$\{?\d/.test(text), `${name}: placeholder left in ${text}`);
    for (const [o, c] of [["{", "}"], ["[", "]"], ["(", ")"]]) {
      assert.equal(text.split(o).length, text.split(c).length, `${name}: unbalanced ${o}${c} in ${text}`);
    }
  }
});

test("the kernel snippet, and the nests put inside a kernel, check clean with leirc", { skip: LEIR_PYTHON ? false : NO_PYTHON_REASON }, async () => {
  const wrap = (nest: string, signature: string) => `\\kernel t(${signature}) {\n${nest}\n}\n`;
  const programs: Record<string, string> = {
    "kernel.leir": expand(bodyOf(snippets["Kernel"])),
    "reduction.leir": wrap(
      expand(bodyOf(snippets["Reduction"])) + "\nL^{128}_{i=0} [ C^{f32,g}_{i} = Acc^{f32,g}_{i}; ];",
      "A: f32[128, 1024], B: f32[1024]) -> (C: f32[128]",
    ),
    "matmul.leir": wrap(
      expand(bodyOf(snippets["Matmul"])).replace(/\bM\b/, "8").replace(/\bN\b/, "8").replace(/\bK\b/, "8"),
      "A: f32[8, 8], B: f32[8, 8]) -> (C: f32[8, 8]",
    ),
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "leir-snippets-"));
  try {
    for (const [name, text] of Object.entries(programs)) fs.writeFileSync(path.join(dir, name), text);
    const inv = leirc({ command: LEIR_PYTHON, args: [], source: "setting" }, ["check", ...Object.keys(programs)]);
    const r = await runProcess(inv.command, inv.args, { cwd: dir });
    assert.equal(r.exitCode, 0, `${Object.values(programs).join("\n")}\n${r.stdout}${r.stderr}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
