// Drives code-server (VS Code in the browser) with headless Chromium through playwright-core.
// Run by e2e/run.sh, which serves code-server and sets E2E_URL, E2E_OUT, E2E_WORKSPACE, E2E_FILE.
// Each check saves a screenshot; result.json lists every check with its outcome and duration.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { chromium } = require("playwright-core");

const URL = process.env.E2E_URL;
const OUT = process.env.E2E_OUT;
const WS = process.env.E2E_WORKSPACE;
const FILE = process.env.E2E_FILE;
const SLOW = Number(process.env.E2E_SLOW_MS || 300_000); // background verification and builds
const MARKER = process.env.E2E_MARKER || ""; // written by the workspace's shadowing modules if imported
const TRACKER = process.env.E2E_TRACKER || ""; // a closed port: the tracker's connection is refused

const results = [];
let shot = 0;

async function check(page, name, fn) {
  const t0 = Date.now();
  let error = null;
  try {
    await fn();
  } catch (e) {
    error = String(e && e.stack ? e.stack : e).split("\n").slice(0, 4).join("\n");
  }
  shot += 1;
  const png = `${String(shot).padStart(2, "0")}-${name}.png`;
  await page.screenshot({ path: path.join(OUT, png) }).catch(() => {});
  const r = { check: name, ok: !error, seconds: (Date.now() - t0) / 1000, screenshot: png, ...(error ? { error } : {}) };
  results.push(r);
  console.log(`${r.ok ? "ok  " : "FAIL"} ${name} (${r.seconds.toFixed(1)} s)${error ? "\n     " + error.replace(/\n/g, "\n     ") : ""}`);
  return r.ok;
}

const norm = (s) => (s || "").replace(/\u00a0/g, " ");

/** The editor's visible text, one string per line, in order. */
async function editorLines(page) {
  return page.evaluate(() => {
    const lines = [...document.querySelectorAll(".editor-instance .view-lines .view-line")];
    return lines
      .map((l) => ({ top: parseFloat(l.style.top || "0"), text: l.textContent.replace(/\u00a0/g, " ") }))
      .sort((a, b) => a.top - b.top)
      .map((l) => l.text);
  });
}

async function command(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(">" + title);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 30_000 });
  await page.keyboard.press("Enter");
}

async function goToLine(page, line, column) {
  await page.keyboard.press("Control+G");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(column ? `:${line}:${column}` : `:${line}`);
  await page.keyboard.press("Enter");
  await input.waitFor({ state: "hidden" });
}

/** Centre of the first token on an editor line whose text is exactly `text`. */
async function tokenBox(page, lineText, text) {
  return page.evaluate(
    ([lineText, text]) => {
      for (const line of document.querySelectorAll(".editor-instance .view-lines .view-line")) {
        if (!line.textContent.replace(/\u00a0/g, " ").includes(lineText)) continue;
        for (const span of line.querySelectorAll("span > span")) {
          if (span.textContent === text) {
            const r = span.getBoundingClientRect();
            return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
          }
        }
      }
      return null;
    },
    [lineText, text],
  );
}

async function hoverText(page, box) {
  await page.mouse.move(box.x - 40, box.y + 60);
  await page.mouse.move(box.x, box.y, { steps: 4 });
  const hover = page.locator(".monaco-hover:not(.hidden) .monaco-hover-content").first();
  await hover.waitFor({ state: "visible", timeout: 10_000 });
  return norm(await hover.innerText());
}

/**
 * Hovers the token until the hover matches `want`. The token is looked up on every try: code
 * lenses and inlay hints arriving from the server move the lines.
 */
async function hoverUntil(page, lineText, token, want, limitMs) {
  const deadline = Date.now() + limitMs;
  let text = "";
  while (Date.now() < deadline) {
    const box = await tokenBox(page, lineText, token);
    if (!box) throw new Error(`token ${token} not found on the line with ${lineText}`);
    text = await hoverText(page, box).catch(() => "");
    if (want.test(text)) return text;
    await page.mouse.move(10, 10);
    await page.waitForTimeout(1000);
  }
  throw new Error(`hover over ${token} never matched ${want}: last ${JSON.stringify(text)}`);
}

/** Language-server processes started under code-server (pid E2E_CSPID), found through /proc. */
function serverPids() {
  const root = Number(process.env.E2E_CSPID || 0);
  const parent = (pid) => {
    try {
      return Number(fs.readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /, "").split(" ")[1]);
    } catch {
      return 0; // the process has gone
    }
  };
  const under = (pid) => {
    for (let p = pid, n = 0; p > 1 && n < 64; p = parent(p), n++) if (p === root) return true;
    return false;
  };
  const pids = [];
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let cmd = "";
    try {
      cmd = fs.readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0").join(" ");
    } catch {
      continue; // exited while we looked
    }
    if (/-m leirc_lsp|from leirc\.cli import main.* lsp/.test(cmd) && under(Number(d))) pids.push(Number(d));
  }
  return pids;
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.E2E_CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
  // Offline: the page may talk to code-server on 127.0.0.1 only; anything else is blocked and recorded.
  const external = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    let host = "";
    try {
      host = new globalThis.URL(url).hostname;
    } catch {
      host = ""; // data: and blob: URLs have no host: local
    }
    if (host && host !== "127.0.0.1" && host !== "localhost") {
      external.push(url);
      return route.abort();
    }
    return route.continue();
  });
  const page = await context.newPage();
  const consoleErrors = [];
  page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
  let all = true;
  const run = async (name, fn) => (all = (await check(page, name, fn)) && all);
  const file = path.join(WS, FILE);
  const original = fs.readFileSync(file, "utf8");

  await run("workbench", async () => {
    await page.goto(URL);
    await page.locator(".monaco-workbench").waitFor({ timeout: 120_000 });
  });

  await run("open-kernel-colours", async () => {
    await page.keyboard.press("Control+P");
    await page.locator(".quick-input-widget input").waitFor({ state: "visible" });
    await page.keyboard.type(FILE);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: FILE }).first().waitFor();
    await page.keyboard.press("Enter");
    await page.locator(".editor-instance .view-lines .view-line").first().waitFor();
    // TextMate colours: a header, a loop kind, a dtype and a comment get different colours.
    const colours = await page.waitForFunction(() => {
      const seen = new Set();
      for (const s of document.querySelectorAll(".editor-instance .view-lines span > span")) seen.add(getComputedStyle(s).color);
      return seen.size >= 5 ? [...seen] : false;
    }, null, { timeout: 60_000 });
    const list = await colours.jsonValue();
    const kw = await tokenBox(page, "\\kernel", "\\kernel");
    if (!kw) throw new Error("\\kernel token not found as its own span: the grammar did not apply");
    console.log(`     ${list.length} colours in the editor`);
  });

  await run("language-server-status", async () => {
    // The server is up when it answers a hover; the status bar carries the extension's item.
    await page.locator(".statusbar", { hasText: "LEIR" }).waitFor({ timeout: 60_000 });
  });

  await run("server-outside-workspace", async () => {
    // the language server never runs in (nor imports from) the folder it was opened on (issue #33)
    let pids = serverPids();
    for (let i = 0; i < 120 && pids.length === 0; i++) {
      await page.waitForTimeout(500); // the extension probes the interpreter first
      pids = serverPids();
    }
    if (pids.length === 0) throw new Error("no language server process found under code-server");
    for (const pid of pids) {
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      if (cwd === WS || cwd.startsWith(WS + path.sep)) throw new Error(`server ${pid} runs in the workspace (${cwd})`);
    }
    if (MARKER && fs.existsSync(MARKER)) throw new Error(`imported from the workspace: ${fs.readFileSync(MARKER, "utf8")}`);
    console.log(`     ${pids.length} server(s), cwd ${pids.map((p) => fs.readlinkSync(`/proc/${p}/cwd`)).join(", ")}`);
  });

  await run("fallbacks-visible", async () => {
    // a model whose key variable is unset and a tracker that is not listening: said in the
    // status bar and, once each, in a notification naming the setting
    await page.locator(".statusbar", { hasText: /LEIR: .*no model/ }).first().waitFor({ timeout: 60_000 });
    await page.locator(".statusbar", { hasText: /no tracker/ }).first().waitFor({ timeout: 30_000 });
    await page.locator(".notifications-toasts .notification-toast", { hasText: "LEIR_E2E_NO_KEY" }).first().waitFor({ timeout: 30_000 });
    await page.locator(".notifications-toasts .notification-toast", { hasText: "connection refused" }).first().waitFor({ timeout: 30_000 });
    const bar = norm(await page.locator(".statusbar").innerText());
    console.log(`     status bar: ${bar.split("\n").filter((l) => l.includes("LEIR")).join(" ")}`);
    await command(page, "Notifications: Clear All Notifications"); // out of the way of the lenses
  });

  await run("run-on-gpu-refused-at-once", async () => {
    // "Run on GPU" against a tracker that is not listening: the lens says so within seconds
    await page.keyboard.press("Escape");
    const lens = page.locator(".codelens-decoration a", { hasText: "Run on GPU" }).first();
    await lens.waitFor({ timeout: 60_000 });
    const t0 = Date.now();
    await lens.click();
    const failed = page.locator(".codelens-decoration", { hasText: /✗ rpc: no RPC tracker is listening/ }).first();
    await failed.waitFor({ timeout: 5_000 });
    console.log(`     after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${norm(await failed.innerText()).slice(0, 160)}`);
    if (TRACKER && !norm(await failed.innerText()).includes(TRACKER)) throw new Error(`the lens does not name ${TRACKER}`);
  });

  await run("hover-shape", async () => {
    const text = await hoverUntil(page, "A^{f32,g}_{i,k}", "A", /f32\[512, 512\]/, 120_000);
    console.log(`     hover: ${text.split("\n")[0]}`);
    await page.mouse.move(10, 10);
  });

  await run("error-squiggle", async () => {
    const lines = await editorLines(page);
    const stmt = lines.findIndex((l) => l.includes("C^{f32,g}_{i,j} = "));
    if (stmt < 0) throw new Error(`statement not found in ${JSON.stringify(lines)}`);
    await goToLine(page, stmt + 1);
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
    await page.keyboard.type("Z^{f32,g}_{0} = Q^{f32,g}_{0};", { delay: 5 });
    await page.locator(".squiggly-error").first().waitFor({ timeout: 60_000 });
    const text = await hoverUntil(page, "= Q^{f32,g}_{0};", "Q", /read before any statement writes it|E018/, 60_000);
    console.log(`     diagnostic: ${text.split("\n")[0]}`);
  });

  await run("error-fixed", async () => {
    await page.mouse.move(10, 10);
    await page.keyboard.press("Escape");
    const lines = await editorLines(page);
    const injected = lines.findIndex((l) => l.includes("= Q^{f32,g}_{0};"));
    if (injected < 0) throw new Error("the injected line is not there");
    await goToLine(page, injected + 1);
    await page.keyboard.press("Control+Shift+K"); // delete the injected line
    await page.locator(".squiggly-error").first().waitFor({ state: "detached", timeout: 60_000 });
    const now = await editorLines(page);
    if (now.some((l) => l.includes("Q^{f32,g}_{0}"))) throw new Error("the injected line is still there");
  });

  let before = [];
  await run("code-action-tiling", async () => {
    before = await editorLines(page);
    const header = before.findIndex((l) => /L\^\{512\}_\{i=0\}/.test(l));
    await goToLine(page, header + 1, before[header].indexOf("L^{512}_{i=0}") + 1);
    const deadline = Date.now() + 120_000;
    const item = page.locator(".action-widget .monaco-list-row.action", { hasText: "Apply loop tiling" }).first();
    // Ctrl+. lists every code action at the cursor (quick fixes and refactorings); the
    // server may still be enumerating sites on the first request, so ask again until it answers.
    while (Date.now() < deadline) {
      await page.keyboard.press("Control+.");
      if (await item.waitFor({ timeout: 15_000 }).then(() => true, () => false)) break;
      await page.keyboard.press("Escape");
      await page.waitForTimeout(1000);
    }
    const titles = await page.locator(".action-widget .monaco-list-row.action").allInnerTexts();
    console.log(`     ${titles.length} actions: ${titles.slice(0, 6).map(norm).join(" | ")}`);
    await item.waitFor({ timeout: 1000 });
    // each strategy action says what applying it guarantees (its numerics class)
    const tiling = norm(await item.innerText());
    if (!/· (proven|tested): /.test(tiling)) throw new Error(`the tiling action does not say proven/tested: ${JSON.stringify(tiling)}`);
  });

  const listed = results[results.length - 1].ok;
  await run("apply-tiling", async () => {
    if (!listed) throw new Error("skipped: the code action was not listed");
    const item = page.locator(".action-widget .monaco-list-row.action", { hasText: "Apply loop tiling" }).first();
    const title = norm(await item.innerText());
    await item.click();
    await page.waitForFunction(
      (n) => [...document.querySelectorAll(".editor-instance .view-lines .view-line")].map((l) => l.textContent).join("\n").split("L^{").length - 1 > n,
      before.join("\n").split("L^{").length - 1,
      { timeout: 60_000 },
    );
    const after = await editorLines(page);
    console.log(`     applied "${title}":\n       ${after.filter((l) => l.trim()).join("\n       ")}`);
  });

  const tiled = results[results.length - 1].ok;
  await run("verification-lens-equal", async () => {
    if (!tiled) throw new Error("skipped: no rewrite was applied");
    // the verification lens, not the kernel line whose GPU lens says "✗ rpc: ..." (a refused tracker)
    const lens = page.locator(".codelens-decoration", { hasText: /✓ equal|✗ (?!rpc:)/ }).first();
    await lens.waitFor({ timeout: SLOW });
    const text = norm(await lens.innerText());
    console.log(`     lens: ${text}`);
    if (!/✓ equal/.test(text)) throw new Error(`verification lens says ${JSON.stringify(text)}`);
    // the criterion that decided, against its bound, and whether the step is proven or only tested
    if (!/✓ equal \((normwise \S+ ≤ \S+|bitwise)\)/.test(text)) throw new Error(`no criterion on the lens: ${JSON.stringify(text)}`);
    if (!/· (proven|tested)/.test(text)) throw new Error(`the lens does not say proven or tested: ${JSON.stringify(text)}`);
    if (/max rel err/.test(text)) throw new Error(`the lens shows the element-wise maximum: ${JSON.stringify(text)}`);
    await page.locator(".statusbar", { hasText: "equal" }).waitFor({ timeout: 10_000 });
  });

  await run("build-command", async () => {
    await command(page, "LEIR: Build");
    // the final message, not the progress notification: it comes after leirc has exited
    const note = page.locator(".notifications-toasts .notification-toast", { hasText: /LEIR: built .* wrote \d+ files/ }).first();
    await note.waitFor({ timeout: SLOW });
    const outDir = path.join(WS, "leirc-out", path.basename(FILE, ".leir"));
    const files = fs.existsSync(outDir) ? fs.readdirSync(outDir) : [];
    if (!files.some((f) => f.endsWith(".tir.py")) || !files.some((f) => f.endsWith(".so"))) {
      throw new Error(`build wrote ${JSON.stringify(files)} to ${outDir}`);
    }
    const saved = fs.readFileSync(file, "utf8");
    if (saved === original) throw new Error("the tiled program was not saved before the build");
    console.log(`     wrote ${files.join(", ")}`);
  });

  await run("suggest-optimization", async () => {
    await page.locator(".tab", { hasText: FILE }).first().click();
    await command(page, "LEIR: Suggest optimization");
    const row = page.locator(".quick-input-widget .monaco-list-row", { hasText: "score" }).first();
    await row.waitFor({ timeout: 120_000 });
    const rows = await page.locator(".quick-input-widget .monaco-list-row").allInnerTexts();
    console.log(`     ${rows.length} suggestions; first: ${norm(rows[0]).replace(/\n/g, " · ")}`);
  });

  await run("show-tir", async () => {
    await page.keyboard.press("Escape");
    await page.locator(".tab", { hasText: FILE }).first().click();
    await command(page, "LEIR: Show TIR");
    await page.locator(".tab", { hasText: ".tir.py" }).first().waitFor({ timeout: SLOW });
    await page.locator(".editor-instance .view-lines", { hasText: "prim_func" }).first().waitFor({ timeout: 30_000 });
  });

  await run("verify-command", async () => {
    await page.locator(".tab", { hasText: FILE }).first().click();
    await command(page, "LEIR: Verify");
    await page.locator(".notifications-toasts .notification-toast", { hasText: /Verified equal|Not equal|Not verified/ }).first().waitFor({ timeout: SLOW });
    const toast = norm(await page.locator(".notifications-toasts .notification-toast", { hasText: /Verified|Not / }).first().innerText());
    console.log(`     ${toast.split("\n").filter((l) => /Verified|Not /.test(l))[0]}`);
    if (!/Verified equal/.test(toast)) throw new Error(`verify said ${JSON.stringify(toast)}`);
    if (!/Verified equal \(llvm\): (normwise relative error \S+ within its bound|bitwise equal)/.test(toast)) {
      throw new Error(`the toast does not give the criterion: ${JSON.stringify(toast)}`);
    }
    if (!/(tested|proven) \(/.test(toast) || /max rel err/.test(toast.split("\n")[0])) {
      throw new Error(`the toast does not say tested/proven, or leads with the element-wise error: ${JSON.stringify(toast)}`);
    }
    await page.locator(".statusbar", { hasText: "LEIR: equal" }).waitFor({ timeout: 10_000 });
  });

  await run("server-crash-restart", async () => {
    const pids = serverPids();
    if (pids.length === 0) throw new Error("no language server process found under code-server");
    for (const pid of pids) process.kill(pid, "SIGKILL");
    await page.locator(".notifications-toasts .notification-toast", { hasText: "stopped unexpectedly; restarting it" }).first().waitFor({ timeout: 60_000 });
    // the restarted server answers again
    const deadline = Date.now() + 120_000;
    while (serverPids().filter((p) => !pids.includes(p)).length === 0 && Date.now() < deadline) await page.waitForTimeout(500);
    // C starts the statement, so it stays visible with the TIR editor open beside
    const text = await hoverUntil(page, "C^{f32,g}_{io*2+i,jo*2+j} = ", "C", /f32\[512, 512\]/, 120_000);
    console.log(`     killed ${pids.join(",")}; after the restart: ${text.split("\n")[0]}`);
  });

  await run("status-bar", async () => {
    await page.locator(".statusbar", { hasText: "LEIR" }).waitFor();
    const text = norm(await page.locator(".statusbar").innerText());
    console.log(`     status bar: ${text.split("\n").filter((l) => l.includes("LEIR")).join(" ")}`);
  });

  await run("workspace-never-imported", async () => {
    if (MARKER && fs.existsSync(MARKER)) throw new Error(`imported from the workspace: ${fs.readFileSync(MARKER, "utf8")}`);
  });

  await run("offline", async () => {
    if (external.length) throw new Error(`${external.length} requests left 127.0.0.1: ${external.slice(0, 5).join(", ")}`);
  });

  fs.writeFileSync(path.join(OUT, "result.json"), JSON.stringify({ ok: all, results, external, consoleErrors: consoleErrors.slice(0, 20) }, null, 2));
  await browser.close();
  const passed = results.filter((r) => r.ok).length;
  console.log(`e2e: ${passed} passed, ${results.length - passed} failed`);
  process.exit(all ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
