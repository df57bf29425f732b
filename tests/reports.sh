#!/usr/bin/env bash
# Every suite's report.html, opened in headless Chromium as a reader would: the page
# must render (a screenshot is taken), log nothing to the console, and have every chart
# drawn; it must fit a 1280-pixel window (no horizontal scrollbar) and no text in its
# charts may be smaller than 11 px. random runs with --seed 101 --cases 20,
# random-migrate with --cases 4 (its oracle is the slow part; the page is drawn by the
# same code).
# `--update` also copies the screenshots to docs/eval/<suite>/report.png.
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

# The window a new reader has: 1280 pixels wide.
width=1280

# Whether $1 (a report) fits the window, measured in a copy with a script (the report
# itself has none) that, once the page is laid out, writes into <pre id=result>:
# "FIT <page width> <window width> <scrolled> <clipped>": the page's scroll width and
# the window's client width (less its vertical scrollbar, which headless Chromium draws
# unless told not to), the elements with a scrollbar of their own (a chart wider than
# its box), and the chart texts cut off at their chart's edge. Read back from the DOM
# Chromium dumps.
fits() {
  local page=$1 probe=$2
  sed 's|</body></html>$||' "$page" >"$probe"
  cat >>"$probe" <<'JS'
<script>
addEventListener("load", function () {
  var d = document.documentElement, scrolled = 0, clipped = 0;
  document.querySelectorAll("*").forEach(function (e) {
    var o = getComputedStyle(e).overflowX;
    if ((o == "auto" || o == "scroll") && e.scrollWidth > e.clientWidth) scrolled++;
  });
  document.querySelectorAll("svg text").forEach(function (t) {
    var b = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
    if (b.left < s.left - 1 || b.right > s.right + 1 || b.top < s.top - 1 || b.bottom > s.bottom + 1) clipped++;
  });
  var p = document.createElement("pre");
  p.id = "result";
  p.textContent = "FIT " + d.scrollWidth + " " + d.clientWidth + " " + scrolled + " " + clipped;
  document.body.appendChild(p);
});
</script></body></html>
JS
  timeout 60 chromium --headless --no-sandbox --disable-gpu --window-size=$width,2400 \
    --virtual-time-budget=2000 --dump-dom "file://$probe" 2>/dev/null |
    grep -o '<pre id="result">FIT [0-9 ]*' | sed 's/.*FIT //'
}

# The texts of the report's charts smaller than 11 px, or without a size, and their
# number: "small total".
small_texts() {
  grep -o '<text[^>]*>' "$1" | awk '
    { n++ }
    match($0, /font-size="[0-9.]+"/) {
      if (substr($0, RSTART + 11, RLENGTH - 12) + 0 < 11) small++
      next
    }
    { small++ }
    END { print small + 0, n + 0 }'
}

for spec in nmass nmass-migrate membus cmload \
  "random --seed 101 --cases 20" "random-migrate --seed 101 --cases 4"; do
  read -r suite args <<<"$spec"
  dir="$out/$suite"
  rm -rf "$dir"
  # shellcheck disable=SC2086 # $args is words by design
  if ! "$bin" eval --suite "$suite" $args --out "$dir" >"$out/$suite.eval.log" 2>&1; then
    bad "$suite: eval failed: $(tail -n 2 "$out/$suite.eval.log" | tr '\n' ' ')"
    continue
  fi
  page="$dir/report.html"
  if grep -q "chart not drawn" "$page"; then
    bad "$suite: a chart was not drawn"
    continue
  fi
  # A tall window: the screenshot shows the summary and the first charts.
  rm -f "$dir/report.png"
  timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --enable-logging=stderr --v=0 --window-size=$width,2400 \
    --screenshot="$dir/report.png" "file://$page" >"$out/$suite.chromium.log" 2>&1
  console=$(grep ':CONSOLE' "$out/$suite.chromium.log" || true)
  size=$(stat -c %s "$dir/report.png" 2>/dev/null || echo 0)
  if [ "$size" -lt 20000 ]; then
    bad "$suite: no screenshot (or a blank one, $size bytes); see $out/$suite.chromium.log"
  elif [ -n "$console" ]; then
    bad "$suite: the page logged to the console: $(head -n 2 <<<"$console")"
  else
    ok "$suite: report.html renders in Chromium without console messages ($size-byte screenshot)"
    if [ "$update" = 1 ]; then
      mkdir -p "$repo/docs/eval/$suite"
      cp "$dir/report.png" "$repo/docs/eval/$suite/report.png"
    fi
  fi

  read -r page_w window_w scrolled clipped <<<"$(fits "$page" "$dir/report.probe.html")"
  if [ -z "${clipped:-}" ]; then
    bad "$suite: could not measure the page's width in Chromium"
  elif [ "$page_w" -gt "$window_w" ]; then
    bad "$suite: OVERFLOW: the page is $page_w px wide where a $width-px window shows $window_w: a horizontal scrollbar"
  elif [ "$scrolled" -gt 0 ]; then
    bad "$suite: OVERFLOW: $scrolled element(s) wider than their box, with a horizontal scrollbar of their own"
  elif [ "$clipped" -gt 0 ]; then
    bad "$suite: $clipped chart text(s) cut off at their chart's edge"
  else
    ok "$suite: FITS a $width-px window (page $page_w px wide, $window_w shown beside the scrollbar; no chart scrolls, no chart text cut off)"
  fi

  read -r small texts <<<"$(small_texts "$page")"
  if [ "$texts" -eq 0 ]; then
    bad "$suite: no chart text found"
  elif [ "$small" -gt 0 ]; then
    bad "$suite: $small of $texts chart texts are smaller than 11 px (or have no size)"
  else
    ok "$suite: all $texts chart texts are at least 11 px"
  fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
