#!/usr/bin/env bash
# The Debian packages the test suite uses (`make test` runs this first):
# - `chromium`, the browser Playwright drives for the web console's tests (nothing
#   downloads a browser of its own);
# - `tesseract-ocr` and `tesseract-ocr-eng`, the OCR engine tether prefers for scanned
#   pages and images (rag.ocr_engine = "auto"); without it, tether reads scans with
#   RapidOCR from the `ocr` extra;
# - `tesseract-ocr-deu`, its German model, which a store of rag.language = "german" reads
#   scans with (the tests read a German scan; French and Spanish have theirs,
#   tesseract-ocr-fra and tesseract-ocr-spa, which the tests do not use);
# - `antiword`, Debian's reader of Word 97-2003 files, which the tests of tether's own
#   reader compare its text with (without it, that comparison is left out).
#
# What is already there is left alone (TETHER_CHROMIUM or TETHER_TESSERACT set counts). On
# Debian or Ubuntu as root (or with password-less sudo): apt-get installs what is missing,
# and a failure fails `make test`. Anywhere else: a warning, and the tests that need a
# missing package skip saying why.
set -euo pipefail

missing=()
if [ -z "${TETHER_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1; then
    missing+=(chromium)
fi
if [ -z "${TETHER_TESSERACT:-}" ]; then
    if ! command -v tesseract >/dev/null 2>&1; then
        missing+=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-deu)
    elif ! tesseract --list-langs 2>/dev/null | grep -qx deu; then
        missing+=(tesseract-ocr-deu)
    fi
fi
if ! command -v antiword >/dev/null 2>&1; then
    missing+=(antiword)
fi
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: no apt-get here: install ${missing[*]} (or set TETHER_CHROMIUM and" \
         "TETHER_TESSERACT to the programs), or the tests that need them are skipped" >&2
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "warning: installing ${missing[*]} needs root: run 'sudo apt-get install" \
         "${missing[*]}', or the tests that need them are skipped" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
echo "installing Debian's ${missing[*]} for the test suite" >&2
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; then
    "${as_root[@]}" apt-get update -q >/dev/null
    "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
for program in "${missing[@]}"; do
    case "$program" in
        chromium) command -v chromium >/dev/null ;;
        tesseract-ocr) command -v tesseract >/dev/null ;;
    esac
done
