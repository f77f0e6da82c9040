import * as path from "node:path";

/** vscode-ext/ (the tests are bundled into out/test/, two levels below it). */
export const EXT_ROOT = path.resolve(__dirname, "..", "..");
export const REPO_ROOT = path.resolve(EXT_ROOT, "..");

/**
 * A Python with leirc installed, for the tests that run the real CLI (`.ci/run` sets it to the
 * project's venv). Those tests skip, saying why, when it is not set.
 */
export const LEIR_PYTHON = process.env.LEIR_PYTHON || "";
export const NO_PYTHON_REASON = "LEIR_PYTHON is not set (point it at a Python with leirc installed)";
