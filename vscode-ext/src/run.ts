// Running a leirc process that the user can cancel. No vscode import: tested in plain Node.

import { spawn } from "node:child_process";

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  cancelled: boolean;
  /** set when the process could not be started (e.g. ENOENT) */
  spawnError?: string;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** called with each chunk of stderr as it arrives (progress lines, "wrote ..."). */
  onStderr?: (text: string) => void;
  onStdout?: (text: string) => void;
  /** resolved or aborted to stop the process (and every process it started) */
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * Starts the command in its own process group, so cancelling also ends the build workers leirc
 * spawns; SIGTERM first, SIGKILL if the group is still there after `graceMs`.
 */
export function runProcess(command: string, args: string[], opts: RunOptions = {}, graceMs = 3000): Promise<RunResult> {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let cancelled = false;
    let settled = false;
    const child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      detached: process.platform !== "win32",
      stdio: ["ignore", "pipe", "pipe"],
    });
    const killGroup = (sig: NodeJS.Signals) => {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
      try {
        if (process.platform !== "win32") process.kill(-child.pid, sig);
        else child.kill(sig);
      } catch {
        child.kill(sig); // the group is gone already; end the child itself if it is not
      }
    };
    const stop = () => {
      cancelled = true;
      killGroup("SIGTERM");
      setTimeout(() => killGroup("SIGKILL"), graceMs).unref();
    };
    const timer = opts.timeoutMs ? setTimeout(stop, opts.timeoutMs) : undefined;
    if (opts.signal) {
      if (opts.signal.aborted) stop();
      else opts.signal.addEventListener("abort", stop, { once: true });
    }
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      stdout += d;
      opts.onStdout?.(d);
    });
    child.stderr.on("data", (d: string) => {
      stderr += d;
      opts.onStderr?.(d);
    });
    const finish = (r: RunResult) => {
      if (settled) return;
      settled = true;
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener("abort", stop);
      resolve(r);
    };
    child.on("error", (err: NodeJS.ErrnoException) =>
      finish({ exitCode: null, signal: null, stdout, stderr, cancelled, spawnError: err.code ?? err.message }),
    );
    child.on("close", (code, sig) => finish({ exitCode: code, signal: sig, stdout, stderr, cancelled }));
  });
}
