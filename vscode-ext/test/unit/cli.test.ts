import assert from "node:assert/strict";
import { test } from "node:test";
import { LEIRC_ENTRY, SAFE_PATH, SERVER_ENTRY, buildArgs, expandTemplate, leirc, safeEnv, searchArgs, serverInvocation, showArgs, verifyArgs, writtenFiles } from "../../src/cli";

const py = { command: "/venv/bin/python", args: ["-X", "utf8"], source: "setting" as const };

test("leirc runs through the interpreter and leirc.cli.main", () => {
  const inv = leirc(py, ["lsp"]);
  assert.equal(inv.command, "/venv/bin/python");
  assert.deepEqual(inv.args, ["-X", "utf8", "-c", LEIRC_ENTRY, "lsp"]);
  assert.match(LEIRC_ENTRY, /from leirc\.cli import main/);
});

test("nothing is imported before the working directory leaves sys.path (issue #33)", () => {
  for (const entry of [LEIRC_ENTRY, SERVER_ENTRY]) {
    assert.ok(entry.startsWith(`${SAFE_PATH};`), entry);
  }
  // only the built-in sys module is imported before the path is cleaned
  assert.match(SAFE_PATH, /^import sys; sys\.path\[:\] = \[p for p in sys\.path if p not in \('', '\.'\)\]$/);
  const env = safeEnv({ PATH: "/bin" });
  assert.equal(env.PYTHONSAFEPATH, "1");
  assert.equal(env.PATH, "/bin");
});

test("build emits tir and lib on the CPU and adds cuda on the GPU", () => {
  assert.deepEqual(buildArgs("k.leir", "out", { target: "llvm", threads: 4, optLevel: "1" }), [
    "build", "k.leir", "-O1", "-t", "llvm", "-o", "out", "--emit", "tir,lib", "--threads", "4",
  ]);
  const cuda = buildArgs("k.leir", "out", { target: "cuda", threads: 2, optLevel: "0" });
  assert.equal(cuda[cuda.indexOf("--emit") + 1], "tir,cuda,lib");
  assert.equal(cuda[2], "-O0");
});

test("show CUDA lowers for cuda whatever the target setting, without verification", () => {
  const a = showArgs("k.leir", "/tmp/x", "cuda", { target: "llvm", threads: 2, optLevel: "1" });
  assert.equal(a[a.indexOf("-t") + 1], "cuda");
  assert.equal(a[a.indexOf("--emit") + 1], "cuda");
  assert.ok(a.includes("--no-verify"));
  const t = showArgs("k.leir", "/tmp/x", "tir", { target: "llvm", threads: 2, optLevel: "1" });
  assert.equal(t[t.indexOf("-t") + 1], "llvm");
});

test("search passes the budget, and the RPC tracker and key only when a tracker is set", () => {
  const base = { target: "llvm" as const, threads: 2, budget: 16, rpcTracker: "", rpcKey: "h100", extraArgs: ["--algo", "beam"] };
  const a = searchArgs("k.leir", "o", base);
  assert.deepEqual(a.slice(0, 4), ["build", "k.leir", "-O", "search"]);
  assert.equal(a[a.indexOf("--budget") + 1], "16");
  assert.ok(!a.includes("--rpc") && !a.includes("--key"));
  assert.deepEqual(a.slice(-2), ["--algo", "beam"]);
  const r = searchArgs("k.leir", "o", { ...base, rpcTracker: "127.0.0.1:9190" });
  assert.equal(r[r.indexOf("--rpc") + 1], "127.0.0.1:9190");
  assert.equal(r[r.indexOf("--key") + 1], "h100");
});

test("verify asks for JSON, with or without a reference program", () => {
  assert.deepEqual(verifyArgs("a.leir", null, "llvm"), ["verify", "a.leir", "-t", "llvm", "--json"]);
  assert.deepEqual(verifyArgs("a.leir", "b.leir", "interp"), ["verify", "a.leir", "b.leir", "-t", "interp", "--json"]);
});

test("writtenFiles reads the build's 'wrote' lines and nothing else", () => {
  const stderr = [
    "leirc: -O1 r: loop_parallelization(loop=N0.i) (0.8 s)",
    "leirc: built r for llvm in 0.5 s",
    "wrote /tmp/out/r.tir.py",
    "wrote /tmp/out dir/r.so\r",
    "overwrote nothing",
    "",
  ].join("\n");
  assert.deepEqual(writtenFiles(stderr), ["/tmp/out/r.tir.py", "/tmp/out dir/r.so"]);
});

test("expandTemplate replaces known variables and leaves unknown ones", () => {
  assert.equal(
    expandTemplate("${fileDirname}/leirc-out/${fileBasenameNoExtension}/${nope}", { fileDirname: "/w", fileBasenameNoExtension: "k" }),
    "/w/leirc-out/k/${nope}",
  );
});

test("the server starts as `leirc lsp`, or as its module (never `python -m`), with the extra arguments", () => {
  assert.deepEqual(serverInvocation(py, "leirc-lsp", ["--log-level", "INFO"]).args, ["-X", "utf8", "-c", LEIRC_ENTRY, "lsp", "--log-level", "INFO"]);
  assert.deepEqual(serverInvocation(py, "module", []).args, ["-X", "utf8", "-c", SERVER_ENTRY]);
});
