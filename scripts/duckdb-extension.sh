#!/usr/bin/env bash
# Build Vev's DuckDB extension: a release build of crates/vev-duckdb (no DuckDB code is
# compiled: the extension binds DuckDB's C API at LOAD), then DuckDB's metadata footer
# appended by the project's own tool. Prints the path of vev.duckdb_extension as its last
# line; load it with `duckdb -unsigned` or allow_unsigned_extensions (README).
#
#   scripts/duckdb-extension.sh                     release build
#   scripts/duckdb-extension.sh --debug             debug build (the tests)
#   scripts/duckdb-extension.sh --features testing  with the test hooks (the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
features=()
while [ $# -gt 0 ]; do
    case "$1" in
    --debug) profile=debug ;;
    --features)
        features=(--features "$2")
        shift
        ;;
    *)
        echo "usage: scripts/duckdb-extension.sh [--debug] [--features LIST]" >&2
        exit 2
        ;;
    esac
    shift
done
build=()
[ "$profile" = release ] && build=(--release)
cargo build "${build[@]}" --quiet -p vev-duckdb --lib --bin vev-duckdb-footer "${features[@]}" >&2
target="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
dir="$target/$profile"
"$dir/vev-duckdb-footer" "$dir/libvev_duckdb.so" "$dir/vev.duckdb_extension"
echo "$dir/vev.duckdb_extension"
