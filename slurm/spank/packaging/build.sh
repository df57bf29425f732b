#!/usr/bin/env bash
# Builds the plugin's Debian package (numasched-spank) and checks it: installed with
# dpkg, its files where Debian's Slurm looks for them, the plugstack line commented,
# purged again. Prints "N passed, N failed" last. Needs root, cargo-deb, libslurm-dev.
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); echo "PASS $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi; }
trap 'echo "$passed passed, $failed failed"' EXIT
command -v cargo-deb >/dev/null || { echo "build.sh: cargo-deb not found (cargo install cargo-deb --locked)" >&2; failed=1; exit 1; }
cargo build --release --locked >&2 || { failed=1; exit 1; }
deb=$(cargo deb --no-build --locked 2>/dev/null | tail -n 1)
check "package built ($deb)" '[[ -f $deb ]]'
[[ -f $deb ]] || exit 1
so=/usr/lib/x86_64-linux-gnu/slurm-wlm/libnumasched_spank.so
conf=/etc/slurm/plugstack.conf.d/numasched.conf
check "depends on its Slurm release" 'dpkg-deb -f "$deb" Depends | grep -q "slurm-wlm-basic-plugins (<< 22.06)"'
check "installs" 'dpkg -i "$deb" >/dev/null 2>&1'
check "the plugin is where Slurm's plugins are" '[[ -f $so ]]'
check "the plugstack line ships commented" 'grep -q "^#optional $so" "$conf" && ! grep -q "^optional" "$conf"'
check "Debian's plugstack.conf includes it" 'grep -q "plugstack.conf.d/\*.conf" /etc/slurm/plugstack.conf'
check "the docs ship with it" '[[ -f /usr/share/doc/numasched-spank/slurm.md ]]'
check "purges" 'dpkg --purge numasched-spank >/dev/null 2>&1'
check "nothing left" '[[ ! -e $so && ! -e $conf ]]'
exit $((failed > 0))
