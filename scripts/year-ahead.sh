#!/usr/bin/env bash
# Runs every test binary of the workspace with the wall clock a year ahead (Debian's
# `faketime`; the monotonic clock is left alone), to find tests that can only pass before a
# date: a fixture, certificate, token or timestamp made once and compared with "now".
#
#   scripts/year-ahead.sh [OFFSET]      (OFFSET as faketime takes it; default +365d)
#
# The binaries are built first on the real clock: rustc, rustdoc and `cargo metadata` do not
# finish under libfaketime, so the doc tests and the one architecture test that asks cargo
# for the crate graph cannot run here (neither reads the time). The test harness keeps
# Chromium on the real clock (tests/src/browser.rs). Exits non-zero when a binary fails.
set -euo pipefail
cd "$(dirname "$0")/.."
offset=${1:-+365d}
command -v faketime >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq faketime; }

binaries=$(cargo test --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") \
            and message["profile"]["test"]:
        print(message["manifest_path"].rsplit("/", 1)[0], message["executable"])
')

failed=()
while read -r dir binary; do
    skip=()
    case "$binary" in
        */architecture-*) skip=(--skip the_crates_depend_only_as_architecture_md_says) ;;
    esac
    echo "== $binary (clock $offset)"
    if ! (cd "$dir" && FAKETIME_DONT_FAKE_MONOTONIC=1 timeout 1800 \
            faketime -f "$offset" "$binary" "${skip[@]}"); then
        failed+=("$binary")
    fi
done <<< "$binaries"

if [ ${#failed[@]} -gt 0 ]; then
    printf 'failed with the clock at %s: %s\n' "$offset" "${failed[@]}"
    exit 1
fi
echo "every test binary passed with the clock at $offset"
