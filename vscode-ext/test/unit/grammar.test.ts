// Tokenizes every .leir file of the repository (stdlib, examples, the grammar fixtures) with the
// extension's TextMate grammar, as VS Code does, and checks that the grammar covers the notation
// the project actually uses: no character is left unscoped and nothing is marked invalid.
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import * as oniguruma from "vscode-oniguruma";
import * as vsctm from "vscode-textmate";
import { EXT_ROOT, REPO_ROOT } from "./helpers";

async function loadGrammar(): Promise<vsctm.IGrammar> {
  const wasm = fs.readFileSync(path.join(EXT_ROOT, "node_modules", "vscode-oniguruma", "release", "onig.wasm"));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength) as ArrayBuffer);
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (p: string[]) => new oniguruma.OnigScanner(p),
      createOnigString: (s: string) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async () => {
      const file = path.join(EXT_ROOT, "syntaxes", "leir.tmLanguage.json");
      return vsctm.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
    },
  });
  const g = await registry.loadGrammar("source.leir");
  assert.ok(g, "grammar did not load");
  return g;
}

/** The kernels the project ships and the strategies' golden outputs (programs leirc produces). */
function leirFiles(): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return;
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".leir")) out.push(p);
    }
  };
  for (const dir of ["stdlib", "examples", path.join("tests", "golden")]) walk(path.join(REPO_ROOT, dir));
  return out.sort();
}

interface Problem {
  file: string;
  line: number;
  col: number;
  text: string;
  scopes: string;
}

async function problems(g: vsctm.IGrammar, file: string): Promise<Problem[]> {
  const found: Problem[] = [];
  let state = vsctm.INITIAL;
  const lines = fs.readFileSync(file, "utf8").split(/\r?\n/);
  lines.forEach((line, i) => {
    const r = g.tokenizeLine(line, state);
    for (const t of r.tokens) {
      const text = line.slice(t.startIndex, t.endIndex);
      const bare = t.scopes.length === 1 && text.trim() !== "";
      const invalid = t.scopes.some((s) => s.startsWith("invalid"));
      if (bare || invalid) found.push({ file: path.relative(REPO_ROOT, file), line: i + 1, col: t.startIndex + 1, text, scopes: t.scopes.join(" ") });
    }
    state = r.ruleStack;
  });
  return found;
}

test("every stdlib, example and golden kernel is fully scoped, with nothing invalid", async () => {
  const g = await loadGrammar();
  const files = leirFiles();
  assert.ok(files.length >= 20, `expected the stdlib next to the extension, found ${files.length} files`);
  const all: Problem[] = [];
  for (const f of files) all.push(...(await problems(g, f)));
  assert.deepEqual(all.slice(0, 10), [], `${all.length} unscoped or invalid tokens in ${files.length} files`);
});

test("loop headers are told apart from tensors named like loop kinds", async () => {
  const g = await loadGrammar();
  const line = "L^{4}_{i=0} [ P^{f32,g}_{i} = B^{f32,g}_{i}; ];";
  const toks = g.tokenizeLine(line, vsctm.INITIAL).tokens.map((t) => ({ text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes }));
  const scopeOf = (text: string) => toks.find((t) => t.text === text)?.scopes.join(" ") ?? "";
  assert.match(scopeOf("L"), /keyword\.control\.loop\.serial/);
  assert.match(scopeOf("P"), /variable\.other\.tensor/);
  assert.match(scopeOf("B"), /variable\.other\.tensor/);
});
