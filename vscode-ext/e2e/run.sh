#!/usr/bin/env bash
# Real-editor end-to-end test: installs the packaged .vsix into code-server (VS Code in the
# browser) on 127.0.0.1, drives it with headless Chromium and saves screenshots.
#
#   bash e2e/run.sh [OUT_DIR]        (from vscode-ext/; OUT_DIR defaults to e2e-out/)
#
# Environment: LEIR_PYTHON (a Python with leirc[lsp]; default: the repository's .venv),
# LEIR_E2E_HOME (where setup.sh installs code-server etc.), LEIR_E2E_PORT (default 18080),
# LEIR_E2E_KERNEL (stdlib kernel to open; default matmul_square), VSIX (skip packaging).
set -euo pipefail
EXT="$(cd "$(dirname "$0")/.." && pwd)"
REPO="$(cd "$EXT/.." && pwd)"
OUT="$(mkdir -p "${1:-$EXT/e2e-out}" && cd "${1:-$EXT/e2e-out}" && pwd)"
E2E_HOME="${LEIR_E2E_HOME:-$HOME/.cache/leir-vscode-e2e}"
PORT="${LEIR_E2E_PORT:-18080}"
KERNEL="${LEIR_E2E_KERNEL:-matmul_square}"
if [ -z "${LEIR_PYTHON:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then LEIR_PYTHON="$REPO/.venv/bin/python"; else LEIR_PYTHON="$(command -v python3)"; fi
fi

bash "$EXT/e2e/setup.sh"
export PATH="$E2E_HOME/node24/package/bin:$PATH"

if [ -z "${VSIX:-}" ]; then
  (cd "$EXT" && npm run --silent package >/dev/null)
  VSIX="$EXT/leir-vscode.vsix"
fi

# A fresh profile and workspace per run, so that nothing from an earlier run is reused.
rm -rf "$OUT/profile" "$OUT/extensions" "$OUT/workspace" "$OUT"/*.png "$OUT/result.json"
mkdir -p "$OUT/profile/User" "$OUT/profile/Machine" "$OUT/workspace" "$OUT/extensions"
cp "$REPO/stdlib/$KERNEL.leir" "$OUT/workspace/"
cat > "$OUT/profile/User/settings.json" <<JSON
{
  "leir.server.pythonPath": "$LEIR_PYTHON",
  "leir.optLevel": "0",
  "leir.threads": 2,
  "workbench.startupEditor": "none",
  "workbench.colorTheme": "Default Dark Modern",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "update.mode": "none",
  "editor.codeLens": true,
  "editor.hover.delay": 200,
  "editor.minimap.enabled": false,
  "files.autoSave": "off",
  "chat.disableAIFeatures": true
}
JSON
# leir.server.pythonPath is machine-scoped: code-server reads it from the Remote (Machine) settings.
printf '{\n  "leir.server.pythonPath": "%s"\n}\n' "$LEIR_PYTHON" > "$OUT/profile/Machine/settings.json"

CS=("$E2E_HOME/cs/node_modules/.bin/code-server" --user-data-dir "$OUT/profile" --extensions-dir "$OUT/extensions")
"${CS[@]}" --install-extension "$VSIX" --force > "$OUT/install.log" 2>&1

setsid "${CS[@]}" --auth none --bind-addr "127.0.0.1:$PORT" --disable-telemetry --disable-update-check \
  --disable-workspace-trust --disable-getting-started-override "$OUT/workspace" > "$OUT/code-server.log" 2>&1 &
CSPID=$!
# code-server starts helpers (file watcher, extension hosts, the language server): end the group.
trap 'kill -TERM -- -$CSPID 2>/dev/null || true; sleep 1; kill -KILL -- -$CSPID 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && break
  kill -0 $CSPID 2>/dev/null || { cat "$OUT/code-server.log"; echo "code-server exited" >&2; exit 1; }
  sleep 0.2
done

NODE_PATH="$E2E_HOME/driver/node_modules" E2E_CSPID=$CSPID \
E2E_URL="http://127.0.0.1:$PORT/?folder=$OUT/workspace" E2E_OUT="$OUT" E2E_WORKSPACE="$OUT/workspace" \
E2E_FILE="$KERNEL.leir" node "${E2E_DRIVER:-$EXT/e2e/driver.cjs}"
