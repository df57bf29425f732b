#!/usr/bin/env bash
# The README's newcomer path, from a fresh clone: its first code block's commands, as a
# new user types them (cargo install, then the nmass evaluation), then the binary on
# PATH answering the commands the README names next. The test suite and the VM bed in
# the same block are CI's own steps and are not run twice here.
#
# `cargo install` goes to a temporary --root instead of ~/.cargo/bin, so nothing on the
# machine changes. Prints PASS/FAIL lines and "N passed, N failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

# The commands of the README's first ```sh block, one per line, comments dropped.
block=$(awk '/^```sh$/ && !seen { on = 1; seen = 1; next } on && /^```$/ { exit }
             on && !/^#/ && NF { print }' "$repo/README.md")
for want in "cargo install --locked --path ." "cargo run --release -- eval --suite nmass --out target/eval-nmass"; do
  if grep -qxF "$want" <<<"$block"; then ok "README says: $want"; else bad "README no longer says: $want"; fi
done

git clone -q "$repo" "$tmp/src" || { bad "git clone"; echo "$pass passed, $fail failed"; exit 1; }
cd "$tmp/src" || exit 1
# One build for both commands (both use the release profile), in the checkout's own
# target directory: the clone's crates are built afresh (cargo keys them by their
# path), the registry dependencies already built there are reused, so CI builds them
# once, not twice.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if cargo install --locked --path . --root "$tmp/root" >"$tmp/install.log" 2>&1; then
  ok "cargo install --locked --path . (into a temporary root)"
else
  bad "cargo install: $(tail -n 3 "$tmp/install.log" | tr '\n' ' ')"
fi
export PATH="$tmp/root/bin:$PATH"

v=$(numasched --version 2>&1)
if [[ $v == numasched\ * ]]; then ok "numasched on PATH: $v"; else bad "numasched --version: $v"; fi
# Captured, not piped: with pipefail, `grep -q` exiting at its first match can kill
# numasched with SIGPIPE and fail the pipeline (seen once in CI).
if help=$(numasched --help 2>&1) && grep -q "Usage: numasched" <<<"$help"; then ok "numasched --help"; else bad "numasched --help"; fi
if out=$(numasched topo 2>&1) && grep -q "node" <<<"$out"; then ok "numasched topo (this machine): $(head -n 1 <<<"$out")"; else bad "numasched topo: $out"; fi

if out=$(cargo run --release -q -- eval --suite nmass --out target/eval-nmass 2>&1); then
  missing=""
  for f in results.json results.csv table.txt report.html; do
    [ -s "target/eval-nmass/$f" ] || missing="$missing $f"
  done
  if [ -n "$missing" ]; then
    bad "eval wrote no$missing"
  elif ! grep -q "report.html" <<<"$out"; then
    bad "eval does not say where its report is: $(tail -n 2 <<<"$out")"
  elif [ "$(awk '{ if (length > m) m = length } END { print m }' <<<"$out")" -gt 100 ]; then
    bad "eval prints lines wider than 100 columns"
  else
    ok "eval --suite nmass: summary within 100 columns, report at target/eval-nmass/report.html"
  fi
else
  bad "eval --suite nmass: $(tail -n 3 <<<"$out" | tr '\n' ' ')"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
