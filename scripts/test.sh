#!/usr/bin/env bash
# Set everything up, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# The page's real-browser test needs Chromium: install Debian's where we can (root with apt-get,
# as on CI); elsewhere say in one line why the page goes untested.
if [ -z "${NMT_CHROMIUM:-}" ] && ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing Chromium (Debian's chromium) for the page's browser test..." >&2
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
            || echo "note: apt-get could not install chromium; the page's browser test will be skipped" >&2
    else
        echo "note: no Chromium (as root: apt-get install chromium; or set NMT_CHROMIUM=/path/to/chrome);" \
             "the page's browser test will be skipped" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
