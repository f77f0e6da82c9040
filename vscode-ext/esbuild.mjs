// Bundles the extension (dist/extension.js) or, with --tests, the unit tests (out/test/*.test.js).
import * as esbuild from "esbuild";
import * as fs from "node:fs";
import * as path from "node:path";

const production = process.argv.includes("--production");
const tests = process.argv.includes("--tests");
const common = { bundle: true, platform: "node", target: "node20", format: "cjs", logLevel: "warning" };

if (tests) {
  const dir = "test/unit";
  const entryPoints = fs.readdirSync(dir).filter((f) => f.endsWith(".test.ts")).map((f) => path.join(dir, f));
  fs.rmSync("out/test", { recursive: true, force: true });
  await esbuild.build({ ...common, entryPoints, outdir: "out/test", sourcemap: "inline" });
} else {
  await esbuild.build({
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "dist/extension.js",
    external: ["vscode"],
    minify: production,
    sourcemap: !production,
  });
}
