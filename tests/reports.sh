#!/usr/bin/env bash
# Every suite's report.html, opened in headless Chromium as a reader would: the page
# must render (a screenshot is taken), log nothing to the console, and have every chart
# drawn. `--update` also copies the screenshots to docs/eval/<suite>/report.png.
#
# Uses the release binary (target/release/numasched, built when missing) and
# chromium, installed with apt when missing. Prints PASS/FAIL lines and
# "N passed, N failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${NUMASCHED_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/numasched}
update=0
[ "${1:-}" = --update ] && update=1
out="$repo/target/reports"
mkdir -p "$out"
pass=0 fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1; then
  bad "chromium could not be installed"
  echo "$pass passed, $fail failed"
  exit 1
fi
[ -x "$bin" ] || (cd "$repo" && cargo build --release --locked -q) || { bad "build"; exit 1; }

for suite in nmass nmass-migrate membus cmload; do
  dir="$out/$suite"
  rm -rf "$dir"
  if ! "$bin" eval --suite "$suite" --out "$dir" >"$out/$suite.eval.log" 2>&1; then
    bad "$suite: eval failed: $(tail -n 2 "$out/$suite.eval.log" | tr '\n' ' ')"
    continue
  fi
  page="$dir/report.html"
  if grep -q "chart not drawn" "$page"; then
    bad "$suite: a chart was not drawn"
    continue
  fi
  # A tall window: the screenshot shows the summary, the legend and the first charts.
  rm -f "$dir/report.png"
  timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --enable-logging=stderr --v=0 --window-size=1280,2400 \
    --screenshot="$dir/report.png" "file://$page" >"$out/$suite.chromium.log" 2>&1
  console=$(grep ':CONSOLE' "$out/$suite.chromium.log" || true)
  size=$(stat -c %s "$dir/report.png" 2>/dev/null || echo 0)
  if [ "$size" -lt 20000 ]; then
    bad "$suite: no screenshot (or a blank one, $size bytes); see $out/$suite.chromium.log"
  elif [ -n "$console" ]; then
    bad "$suite: the page logged to the console: $(head -n 2 <<<"$console")"
  else
    ok "$suite: report.html renders in Chromium without console messages ($size-byte screenshot)"
    [ "$update" = 1 ] && cp "$dir/report.png" "$repo/docs/eval/$suite/report.png"
  fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
