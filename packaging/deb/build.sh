#!/usr/bin/env bash
# Builds the Debian package: the release binary, then the man pages and shell
# completions it generates (so they list exactly its flags), then `cargo deb`.
#   packaging/deb/build.sh            # prints the path of the .deb
# Needs cargo-deb (`cargo install cargo-deb --locked`).
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v cargo-deb >/dev/null || { echo "build.sh: cargo-deb not found (cargo install cargo-deb --locked)" >&2; exit 2; }

cargo build --release --locked >&2
bin=target/release/numasched
assets=target/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin" man --out "$assets/man" >/dev/null
gzip -9n "$assets"/man/*.1
"$bin" completions bash >"$assets/completions/numasched.bash"
"$bin" completions zsh >"$assets/completions/_numasched"
"$bin" completions fish >"$assets/completions/numasched.fish"
# The binary was just built without debug info (the release profile drops it);
# cargo deb packages it.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
deb="target/debian/numasched_${version}-1_$(dpkg --print-architecture).deb"
rm -f "$deb"
if ! cargo deb --no-build --locked --output "$deb" >/dev/null 2>"$assets/cargo-deb.log"; then
  cat "$assets/cargo-deb.log" >&2
  exit 1
fi
echo "$deb"
