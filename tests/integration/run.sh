#!/bin/bash
# SPDX-License-Identifier: MIT
# Integration tests (pytest): the `shortcut` command and system-level checks.
# Installs what it needs when it can (root + apt-get / pip), else says what is
# missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

need_apt=()
command -v strace >/dev/null || need_apt+=(strace)
command -v nc >/dev/null || need_apt+=(netcat-openbsd)
if [ ${#need_apt[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing: ${need_apt[*]}"
		apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
	else
		echo "missing Debian packages (tests that need them will skip): ${need_apt[*]}"
	fi
fi
if ! python3 -c 'import pytest' 2>/dev/null; then
	python3 -m pip install -q pytest
fi
exec python3 -m pytest -q tests/integration "$@"
