#!/usr/bin/env bash
# The multi-node NUMA test bed (docs/vm.md): boots small Linux guests under QEMU TCG with
# 2, 4 and 3 (one CPU-less) NUMA nodes, runs tests/vm/guest/scenarios.sh inside each and
# counts the PASS/FAIL/SKIP lines they print. See docs/vm.md.
#
#   tests/vm/run.sh                 # every topology
#   tests/vm/run.sh 2n              # only some (names: 2n 4n cpuless)
#
# Environment:
#   NUMASCHED_BIN        numasched binary to test (default target/release/numasched, or
#                        $CARGO_TARGET_DIR/release/numasched; built with
#                        `cargo build --release --locked` when missing)
#   NUMASCHED_VM_CACHE   where the kernel and the base initramfs are cached
#                        (default ~/.cache/numasched-vm)
#   NUMASCHED_VM_TIMEOUT seconds one guest may run before it counts as hung (900)
#   NUMASCHED_VM_SCENARIOS  space-separated subset of scenarios to run in each guest;
#                        (`tcgpairs`, a diagnostic, is not in the default list)
#   NUMASCHED_VM_SCENARIO_LIMIT  seconds one scenario may run inside the guest before
#                        its watchdog says FAIL and the next one starts (360)
#   NUMASCHED_VM_NOHARM_ROUNDS  rounds of the noharm scenario (3; 9 for the figure in
#                        docs/vm.md, with a scenario limit of 900)
#
# Runs as root on a Debian-like host (installs what it needs with apt).
set -eu
set -o pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
here="$repo/tests/vm"
cache=${NUMASCHED_VM_CACHE:-$HOME/.cache/numasched-vm}
out="$repo/target/vm"
guest_timeout=${NUMASCHED_VM_TIMEOUT:-900}
scenario_limit=${NUMASCHED_VM_SCENARIO_LIMIT:-360}
case $scenario_limit in ''|*[!0-9]*) echo "NUMASCHED_VM_SCENARIO_LIMIT: '$scenario_limit' is not a whole number of seconds" >&2; exit 2 ;; esac
noharm_rounds=${NUMASCHED_VM_NOHARM_ROUNDS:-3}
case $noharm_rounds in ''|*[!0-9]*|0) echo "NUMASCHED_VM_NOHARM_ROUNDS: '$noharm_rounds' is not a whole number of rounds (1 or more)" >&2; exit 2 ;; esac
bin=${NUMASCHED_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/numasched}
# Set but empty: boot and power off only (measures boot time).
scenarios=${NUMASCHED_VM_SCENARIOS-topo placement restore noharm pinned migrate mems numad}

log() { printf '== %s\n' "$*"; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }

# --- host tools -------------------------------------------------------------------------

# Installs the Debian packages that are missing; `apt-get update` at most once.
# busybox-static (not the dynamic busybox) is what the initramfs needs; binutils gives
# strip; util-linux gives taskset.
ensure_packages() {
  local need=() pkg
  for pkg in qemu-system-x86 busybox-static numactl numad stress-ng cpio util-linux \
             binutils gzip; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = 'install ok installed' ] ||
      need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing ${need[*]} and not root: install them first"
    log "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt_updated=1
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

# --- kernel -----------------------------------------------------------------------------

# Debian's cloud kernel: small, has NUMA, ACPI SRAT/SLIT, serial console and devtmpfs
# built in, so the guest needs no modules. The meta package only depends on the real
# linux-image-<abi>-cloud-amd64 package, which is the one downloaded and unpacked.
kernel_package() {
  apt-cache depends linux-image-cloud-amd64 2>/dev/null |
    awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
ensure_kernel() {
  if [ -s "$cache/vmlinuz" ]; then return; fi
  log "fetching the Debian cloud kernel into $cache"
  mkdir -p "$cache/kernel-deb"
  local real
  real=$(kernel_package)
  # No package lists yet (a fresh machine whose tools were all installed): update once.
  if [ -z "$real" ] && [ -z "${apt_updated:-}" ]; then
    apt-get update -qq
    real=$(kernel_package)
  fi
  [ -n "$real" ] || die "cannot resolve linux-image-cloud-amd64 to a kernel package"
  (cd "$cache/kernel-deb" && rm -f ./*.deb && apt-get download "$real" 2>&1 |
     grep -v 'unsandboxed' || true)
  local deb
  deb=$(ls "$cache"/kernel-deb/*.deb 2>/dev/null | head -n 1)
  [ -n "$deb" ] || die "apt-get download $real produced no .deb"
  rm -rf "$cache/kernel-x"
  dpkg -x "$deb" "$cache/kernel-x"
  cp "$cache"/kernel-x/boot/vmlinuz-* "$cache/vmlinuz.tmp"
  echo "$real" >"$cache/kernel-version"
  mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
  rm -rf "$cache/kernel-x" "$cache/kernel-deb"
}

# --- initramfs --------------------------------------------------------------------------

# Copies an executable and every shared library ldd lists for it (and the loader) into
# the tree $1, at the same paths as on the host.
copy_with_libs() {
  local root=$1 exe=$2 dest=${3:-$2} lib
  mkdir -p "$root/$(dirname "$dest")"
  cp -L "$exe" "$root/$dest"
  for lib in $(ldd "$exe" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'); do
    if [ ! -e "$root$lib" ]; then
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    fi
  done
}

# Base image (cached): busybox, stress-ng, numad, numactl, taskset, unshare (util-linux,
# for a time namespace) and their libraries.
# The key is the versions of those tools plus the text of this function, so an upgrade
# or a change here rebuilds it.
ensure_base_initramfs() {
  local key
  key=$(declare -f ensure_base_initramfs copy_with_libs | md5sum | cut -c1-12
    for t in busybox-static stress-ng numad numactl util-linux libc6; do
    dpkg-query -W -f='${Package}=${Version} ' "$t" 2>/dev/null || true; done)
  if [ -s "$cache/base.cpio.gz" ] && [ "$(cat "$cache/base.key" 2>/dev/null)" = "$key" ]; then
    return
  fi
  log "building the base initramfs (busybox, stress-ng, numad, numactl, taskset)"
  local root="$cache/base-root"
  rm -rf "$root"
  mkdir -p "$root"/{bin,sbin,usr/bin,etc,proc,sys,dev,tmp,run,var/log,var/run,root}
  cp /bin/busybox "$root/bin/busybox"
  # /usr/bin comes first in the guest's PATH, so these win over busybox applets.
  local tool
  for tool in stress-ng numad numactl taskset unshare; do
    copy_with_libs "$root" "$(command -v $tool)" "/usr/bin/$tool"
  done
  # The loader at its canonical path, whatever ldd printed.
  mkdir -p "$root/lib64"
  [ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$cache/base.cpio.gz.tmp"
  mv "$cache/base.cpio.gz.tmp" "$cache/base.cpio.gz"
  echo "$key" >"$cache/base.key"
  rm -rf "$root"
}

# The part rebuilt on every run: numasched (stripped: the release build carries debug
# info that would only slow the boot), its libraries, /init and the scenario script.
# The kernel unpacks concatenated gzip'd cpio archives in order, later files on top.
build_app_initramfs() {
  local root="$out/app-root"
  rm -rf "$root"
  mkdir -p "$root/bin"
  copy_with_libs "$root" "$bin" /usr/bin/numasched
  strip "$root/usr/bin/numasched"
  install -m 0755 "$here/guest/init.sh" "$root/init"
  install -m 0755 "$here/guest/scenarios.sh" "$root/bin/scenarios.sh"
  (cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) >"$out/app.cpio.gz"
  rm -rf "$root"
}

# --- topologies -------------------------------------------------------------------------

# Sets qemu_args (array) and expect (text for /etc/nstest.conf, sourced by the guest) for
# topology $1. Every socket's CPUs stay inside one node; total memory is 2 GiB.
topology() {
  qemu_args=(-m 2048)
  case $1 in
    2n) # two nodes x two CPUs, the SPEC recipe
      qemu_args+=(-smp 4,sockets=2,cores=2
        -object memory-backend-ram,id=m0,size=1024M -object memory-backend-ram,id=m1,size=1024M
        -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1)
      expect='NODES="0 1"
CPUS_0="0 1"; CPUS_1="2 3"
DIST_0="10 20"; DIST_1="20 10"
MIGRATE_HOME=1' ;;
    4n) # four nodes x two CPUs; 16 within a socket pair (0-1, 2-3), 22 across
      qemu_args+=(-smp 8,sockets=4,cores=2)
      local n
      for n in 0 1 2 3; do
        qemu_args+=(-object "memory-backend-ram,id=m$n,size=512M"
          -numa "node,nodeid=$n,cpus=$((2 * n))-$((2 * n + 1)),memdev=m$n")
      done
      local pairs="0,1,16 0,2,22 0,3,22 1,2,22 1,3,22 2,3,16" p s d v
      for p in $pairs; do
        IFS=, read -r s d v <<<"$p"
        qemu_args+=(-numa "dist,src=$s,dst=$d,val=$v")
      done
      expect='NODES="0 1 2 3"
CPUS_0="0 1"; CPUS_1="2 3"; CPUS_2="4 5"; CPUS_3="6 7"
DIST_0="10 16 22 22"; DIST_1="16 10 22 22"; DIST_2="22 22 10 16"; DIST_3="22 22 16 10"
MIGRATE_HOME=1' ;;
    cpuless) # two CPU nodes and node 2 with memory only (QEMU refuses sparse node ids)
      qemu_args+=(-smp 4,sockets=2,cores=2
        -object memory-backend-ram,id=m0,size=768M -object memory-backend-ram,id=m1,size=768M
        -object memory-backend-ram,id=m2,size=512M
        -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1
        -numa node,nodeid=2,memdev=m2
        -numa dist,src=0,dst=1,val=20 -numa dist,src=0,dst=2,val=17 -numa dist,src=1,dst=2,val=28)
      expect='NODES="0 1 2"
CPUS_0="0 1"; CPUS_1="2 3"; CPUS_2=""
DIST_0="10 20 17"; DIST_1="20 10 28"; DIST_2="17 28 10"
MIGRATE_HOME=1' ;;
    *) die "unknown topology '$1' (known: 2n 4n cpuless)" ;;
  esac
}

# --- one guest --------------------------------------------------------------------------

# Boots topology $1, saves its console to $out/$1.log, prints it as it comes.
# Returns 0 when the guest ran to its end marker, 124 on timeout, 1 otherwise.
run_guest() {
  local name=$1 conf_root="$out/conf-$1" rc=0 t0 t1
  topology "$name"
  rm -rf "$conf_root"
  mkdir -p "$conf_root/etc"
  printf 'TOPO=%s\n%s\nSCENARIOS="%s"\nSCENARIO_LIMIT=%s\nNOHARM_ROUNDS=%s\n' "$name" "$expect" \
    "$scenarios" "$scenario_limit" "$noharm_rounds" >"$conf_root/etc/nstest.conf"
  (cd "$conf_root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/conf-$name.cpio.gz"
  cat "$cache/base.cpio.gz" "$out/app.cpio.gz" "$out/conf-$name.cpio.gz" >"$out/initrd-$name.gz"
  rm -rf "$conf_root" "$out/conf-$name.cpio.gz"

  log "guest $name: qemu ${qemu_args[*]}"
  t0=$(date +%s.%N)
  # The guest's console goes to stdout; -no-reboot plus panic=-1 turn any panic or the
  # final poweroff into a QEMU exit. `timeout` turns a hang into a failure.
  timeout --kill-after=10 "$guest_timeout" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max "${qemu_args[@]}" \
    -kernel "$cache/vmlinuz" -initrd "$out/initrd-$name.gz" \
    -append "console=ttyS0 panic=-1 quiet" \
    -nographic -no-reboot -net none </dev/null 2>&1 |
    tr -d '\r' | sed -u -e 's/\x1b\[[0-9;?]*[a-zA-Z]//g' -e 's/\x1bc//g' |
    tee "$out/$name.log" | sed -u "s/^/[$name] /" || rc=$?
  t1=$(date +%s.%N)
  rm -f "$out/initrd-$name.gz"
  guest_secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then return 124; fi
  grep -q '^NSTEST_END' "$out/$name.log" || return 1
  return 0
}

# --- main -------------------------------------------------------------------------------

main() {
  local topos="${*:-2n 4n cpuless}" suite_t0 pass=0 fail=0 skip=0 problems=() name rc
  suite_t0=$(date +%s.%N)
  [ "$(uname -m)" = x86_64 ] || die "needs an x86_64 host"
  ensure_packages
  if [ ! -x "$bin" ]; then
    [ -z "${NUMASCHED_BIN:-}" ] || die "NUMASCHED_BIN=$bin is not executable"
    log "building numasched (release)"
    (cd "$repo" && cargo build --release --locked)
  fi
  mkdir -p "$cache" "$out"
  ensure_kernel
  ensure_base_initramfs
  build_app_initramfs

  for name in $topos; do
    rc=0
    run_guest "$name" || rc=$?
    local p f s
    p=$(grep -c '^PASS ' "$out/$name.log" || true)
    f=$(grep -c '^FAIL ' "$out/$name.log" || true)
    s=$(grep -c '^SKIP ' "$out/$name.log" || true)
    pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
    # Boot time: the guest prints its own uptime when /init starts.
    local boot
    boot=$(sed -n 's/^NSTEST_BOOTED uptime=\([0-9.]*\).*/\1/p' "$out/$name.log" | head -n 1)
    log "guest $name: ${guest_secs}s wall, booted to /init at ${boot:-?}s guest uptime; $p passed, $f failed, $s skipped"
    grep '^RESULT_JSON ' "$out/$name.log" | sed 's/^RESULT_JSON //' >"$out/numad-comparison-$name.json" || true
    [ -s "$out/numad-comparison-$name.json" ] || rm -f "$out/numad-comparison-$name.json"
    local last
    last=$(sed -n 's/^--- //p' "$out/$name.log" | tail -n 1)
    [ -z "$last" ] || last=", during scenario '$last'"
    if [ "$rc" != 0 ] && ! grep -q '^NSTEST_BOOTED' "$out/$name.log"; then
      problems+=("guest $name did not boot (exit $rc; console in $out/$name.log)")
    elif [ "$rc" = 124 ]; then
      problems+=("guest $name (topology $name) timed out after ${guest_timeout}s$last")
    elif [ "$rc" != 0 ]; then
      problems+=("guest $name (topology $name) stopped before the end of its scenarios$last (console in $out/$name.log)")
    fi
  done

  rm -f "$out/app.cpio.gz"
  echo
  log "summary"
  for name in $topos; do
    grep -E '^(PASS|FAIL|SKIP) ' "$out/$name.log" 2>/dev/null | sed "s/^/  [$name] /" || true
  done
  for p in "${problems[@]+"${problems[@]}"}"; do echo "  ERROR: $p"; done
  log "VM suite wall time: $(awk -v a="$suite_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')s"
  local total="$pass passed, $fail failed"
  [ "$skip" = 0 ] || total="$total, $skip skipped"
  echo "$total"
  if [ "$fail" -gt 0 ] || [ ${#problems[@]} -gt 0 ]; then exit 1; fi
}

main "$@"
