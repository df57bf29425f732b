#!/usr/bin/env bash
# Installs the Debian package built by build.sh on this machine, checks what it put
# where without systemd (binary, man pages, completions, config, unit), and purges it
# again. Prints one PASS/FAIL line per check and a closing "N passed, N failed" line.
#   packaging/deb/check.sh target/debian/numasched_<version>_amd64.deb
# Root; leaves nothing installed. Refuses to touch a numasched package that was
# installed before it ran.
set -uo pipefail
deb=${1:?usage: check.sh PACKAGE.deb}
[ "$(id -u)" = 0 ] || { echo "check.sh: needs root (dpkg -i)" >&2; exit 2; }
if [ "$(dpkg-query -W -f='${Status}' numasched 2>/dev/null)" = 'install ok installed' ]; then
  echo "check.sh: a numasched package is already installed here; not touching it" >&2
  exit 2
fi
pass=0 fail=0
check() { # name, command...
  local name=$1; shift
  if out=$("$@" 2>&1); then echo "PASS $name"; pass=$((pass + 1))
  else echo "FAIL $name: $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"; fail=$((fail + 1)); fi
}
version=$(dpkg-deb -f "$deb" Version)
check "installs" dpkg -i "$deb"
# What an operator downloads and keeps on every node: no debug info, under 20 MB.
check "binary has no debug info" sh -c '! readelf -S /usr/bin/numasched | grep -q "\.debug_info"'
check "installed size under 20 MB" sh -c '[ "$(dpkg-query -W -f="\${Installed-Size}" numasched)" -lt 20480 ]'
check "maintainer has an address" sh -c 'dpkg-query -W -f="\${Maintainer}" numasched | grep -q "<.*@.*>"'
check "binary on PATH says its version" sh -c "numasched --version | grep -q \"numasched ${version%-*}\""
check "config is a conffile" sh -c "dpkg-query -W -f='\${Conffiles}' numasched | grep -q /etc/numasched/numasched.toml"
check "shipped config passes config check" numasched config check /etc/numasched/numasched.toml
check "man pages (numasched, daemon, run)" sh -c 'for p in numasched numasched-daemon numasched-run; do gzip -t /usr/share/man/man1/$p.1.gz || exit 1; done'
check "man page says EXIT STATUS" sh -c 'zcat /usr/share/man/man1/numasched-daemon.1.gz | grep -q "EXIT STATUS"'
check "bash completion completes subcommands" bash -c 'source /usr/share/bash-completion/completions/numasched && complete -p numasched'
check "zsh and fish completions" test -s /usr/share/zsh/vendor-completions/_numasched -a -s /usr/share/fish/vendor_completions.d/numasched.fish
check "unit runs the packaged binary" grep -q '^ExecStart=/usr/bin/numasched daemon$' /lib/systemd/system/numasched.service
if command -v systemd-analyze >/dev/null; then
  check "unit verifies" systemd-analyze verify /lib/systemd/system/numasched.service
fi
check "the Slurm TaskProlog runs" sh -c 'env -u NUMASCHED NUMASCHED_DEFAULT_FILE=/nonexistent /usr/lib/numasched/numasched-taskprolog | grep -qx "export NUMASCHED=manage"'
check "purges" dpkg --purge numasched
check "nothing left" sh -c '! test -e /usr/bin/numasched && ! test -e /etc/numasched && ! test -e /lib/systemd/system/numasched.service && ! test -e /usr/lib/numasched'
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
