#!/usr/bin/env bash
# Put promtool (Prometheus' rule checker) in the directory $1, for the tests of the alert rules
# in docs/observability/ (tests/docs/test_observability_files.py). It comes from Debian's
# `prometheus` package, only unpacked: no service is installed or started.
set -euo pipefail
dest="$(cd "$1" && pwd)"  # absolute: the download happens in a temporary directory
if command -v promtool >/dev/null; then
    ln -sf "$(command -v promtool)" "$dest/promtool"
    exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
if ! timeout 120 apt-get download prometheus >/dev/null 2>&1; then
    timeout 300 apt-get update -qq >/dev/null  # a fresh machine has no package lists yet
    timeout 120 apt-get download prometheus >/dev/null
fi
dpkg -x prometheus_*.deb unpacked
install -m 755 unpacked/usr/bin/promtool "$dest/promtool"
