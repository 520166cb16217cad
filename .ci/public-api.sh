#!/usr/bin/env bash
# public-api step: the public items of crtc and crtc-strategies (every
# feature on) must equal the checked-in lists api/crtc.txt and
# api/crtc-strategies.txt, so a change of the public surface fails CI unless
# the same commit updates the list (and the diff shows it to a reviewer).
# Items marked #[doc(hidden)] (the harness module, the mutant! macro) are
# not listed: rustdoc leaves them out of its JSON, so they stay free to
# change. Blanket and auto-trait impls are omitted (-ss); derived impls stay.
#
# Tool: cargo-public-api (crates.io; the version below), which reads the
# nightly toolchain's rustdoc JSON. When missing, it is installed with
# `cargo install --locked` (about 3 min of CPU; 8 min 48 s wall on a loaded
# 2-core machine, 3 min 7 s user). Builds in target/public-api.
#
# Usage: .ci/public-api.sh [--update]   (--update rewrites the lists)
# Prints one summary line, or "public-api: skipped (no nightly toolchain)".
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.52.0
packages=(crtc crtc-strategies)
update=false
case "${1:-}" in
"") ;;
--update) update=true ;;
*)
    echo "usage: $0 [--update]" >&2
    exit 2
    ;;
esac

if ! command -v rustup >/dev/null || ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "public-api: skipped (no nightly toolchain)"
    exit 0
fi
if [ "$(cargo public-api --version 2>/dev/null)" != "cargo-public-api $version" ]; then
    cargo install --locked --quiet cargo-public-api --version "$version"
fi

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/public-api"
mkdir -p api
changed=() counts=()
for package in "${packages[@]}"; do
    list="api/$package.txt"
    current=$(mktemp)
    cargo public-api --color never -p "$package" --all-features -ss >"$current" 2>/dev/null ||
        { cargo public-api --color never -p "$package" --all-features -ss; exit 1; }
    counts+=("$package $(wc -l <"$current") lines")
    if $update; then
        mv "$current" "$list"
        chmod 644 "$list"
    elif ! diff -u "$list" "$current"; then
        changed+=("$package")
        rm -f "$current"
    else
        rm -f "$current"
    fi
done

summary=$(printf '%s, ' "${counts[@]}")
if $update; then
    echo "public-api: wrote api/ (${summary%, })"
elif [ ${#changed[@]} -gt 0 ]; then
    echo "public-api: the public items of ${changed[*]} differ from api/ (diff above); if intended, run .ci/public-api.sh --update and commit api/"
    exit 1
else
    echo "public-api: ${summary%, } equal to the lists in api/ (cargo-public-api $version, every feature)"
fi
