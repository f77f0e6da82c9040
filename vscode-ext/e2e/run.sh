#!/usr/bin/env bash
# Real-editor end-to-end test: installs the packaged .vsix into code-server (VS Code in the
# browser) on 127.0.0.1, drives it with headless Chromium and saves screenshots.
#
#   bash e2e/run.sh [OUT_DIR]        (from vscode-ext/; OUT_DIR defaults to e2e-out/)
#
# Environment: LEIR_PYTHON (a Python with leirc[lsp]; default: the repository's .venv),
# LEIR_E2E_HOME (where setup.sh installs code-server etc.), LEIR_E2E_PORT (default 18080),
# LEIR_E2E_KERNEL (stdlib kernel to open; default matmul_square), VSIX (skip packaging).
#
# Offline: once setup.sh has installed the tools, nothing is looked up on the network. The
# extension gallery is switched off (EXTENSIONS_GALLERY='{}'), telemetry, update checks,
# experiments and recommendations are off, the browser's requests to anything but
# 127.0.0.1 are blocked and recorded by the driver (its "offline" check fails on any), and
# code-server's log is checked for gallery lookups after the run.
#
# Also covered (issue #33): the workspace holds modules that shadow the standard library
# (random.py, typing.py, ...), each writing a marker when imported: the marker must never
# appear and the server must run outside the workspace; the settings name a model whose key
# variable is unset and an RPC tracker on a closed port, so the status bar and one-time
# notifications must say why neither is used and "Run on GPU" must fail at once with
# "connection refused"; the lenses and the Verify toast must show the criterion that
# decided (normwise error against its bound) and proven / tested.
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
rm -rf "$OUT/profile" "$OUT/extensions" "$OUT/workspace" "$OUT"/*.png "$OUT/result.json" "$OUT/imported.txt"
mkdir -p "$OUT/profile/User" "$OUT/profile/Machine" "$OUT/workspace" "$OUT/extensions"
cp "$REPO/stdlib/$KERNEL.leir" "$OUT/workspace/"
# A cloned repository that tries to run code in the editor: each module notes its import.
MARKER="$OUT/imported.txt"
for m in random typing types copy inspect logging queue signal select token numbers json re enum functools; do
  printf "open(%s, 'a').write(__name__ + '\\\\n')\nraise ImportError('imported from the workspace')\n" "'$MARKER'" \
    > "$OUT/workspace/$m.py"
done
# A port nothing listens on: the tracker's connection is refused.
TRACKER_PORT="$("$LEIR_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
unset LEIR_E2E_NO_KEY
cat > "$OUT/profile/User/settings.json" <<JSON
{
  "leir.server.pythonPath": "$LEIR_PYTHON",
  "leir.optLevel": "0",
  "leir.threads": 2,
  "leir.rpc.tracker": "127.0.0.1:$TRACKER_PORT",
  "leir.rpc.key": "e2e",
  "leir.llm.baseUrl": "http://127.0.0.1:9/v1",
  "leir.llm.model": "e2e-model",
  "leir.llm.keyEnv": "LEIR_E2E_NO_KEY",
  "workbench.startupEditor": "none",
  "workbench.colorTheme": "Default Dark Modern",
  "workbench.tips.enabled": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "telemetry.feedback.enabled": false,
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "workbench.enableExperiments": false,
  "workbench.settings.enableNaturalLanguageSearch": false,
  "npm.fetchOnlinePackageInfo": false,
  "typescript.disableAutomaticTypeAcquisition": true,
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

# No extension gallery at all: code-server would otherwise look up open-vsx.org.
export EXTENSIONS_GALLERY='{}'
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

rc=0
NODE_PATH="$E2E_HOME/driver/node_modules" E2E_CSPID=$CSPID \
E2E_URL="http://127.0.0.1:$PORT/?folder=$OUT/workspace" E2E_OUT="$OUT" E2E_WORKSPACE="$OUT/workspace" \
E2E_FILE="$KERNEL.leir" E2E_MARKER="$MARKER" E2E_TRACKER="127.0.0.1:$TRACKER_PORT" \
  node "${E2E_DRIVER:-$EXT/e2e/driver.cjs}" || rc=$?
# code-server itself must not have looked anything up (the gallery, update checks)
if grep -E "open-vsx\.org|marketplace\.visualstudio\.com|update\.code\.visualstudio\.com|ENOTFOUND|EAI_AGAIN" \
     "$OUT/code-server.log" "$OUT/install.log" > "$OUT/network-lookups.txt"; then
  echo "FAIL offline: code-server looked up the network:" >&2
  head -5 "$OUT/network-lookups.txt" >&2
  rc=1
fi
if [ -s "$MARKER" ]; then
  echo "FAIL workspace-never-imported: $(tr '\n' ' ' < "$MARKER")" >&2
  rc=1
fi
exit $rc
