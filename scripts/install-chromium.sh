#!/usr/bin/env bash
# Debian's `chromium` for the web console's browser tests (`make test` runs this first).
# Playwright drives this browser; nothing downloads a browser of its own.
#
# Already on PATH (or TETHER_CHROMIUM set): nothing to do. On Debian or Ubuntu as root (or
# with password-less sudo): apt-get installs it, and a failure fails `make test`. Anywhere
# else: a warning, and the browser tests skip saying why.
set -euo pipefail

if [ -n "${TETHER_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: no apt-get here: install Chromium and set TETHER_CHROMIUM=/path/to/it," \
         "or the console's browser tests are skipped" >&2
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "warning: installing Debian's chromium needs root: run" \
         "'sudo apt-get install chromium', or the console's browser tests are skipped" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "installing Debian's chromium for the console's browser tests" >&2
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null; then
    "${as_root[@]}" apt-get update -q >/dev/null
    "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null
fi
command -v chromium >/dev/null
