#!/usr/bin/env bash
# Create/refresh the project virtualenv at <repo>/.venv.
#
#   scripts/bootstrap.sh        (or: . scripts/bootstrap.sh — safe to source;
#                                it does not change the caller's shell options)
#   scripts/bootstrap.sh --test ... and the test-only packages (requirements-test.txt)
#
# Idempotent: the venv is created with `python3 -m venv` only when missing or
# broken, and `pip install -r requirements.txt` runs only when requirements.txt
# (or the venv's Python version) changed since the last successful install.
# Each set has its own stamp: .venv/.requirements.sha256 (requirements.txt) and
# .venv/.requirements-test.sha256 (both files), so `make run` after `make test`
# installs nothing. Afterwards use .venv/bin/python.
#
# Environment knobs:
#   PYTHON=/path/to/python3     interpreter used to create the venv
#   BOOTSTRAP_TEST=1            same as --test
#   BOOTSTRAP_FORCE=1           reinstall requirements even if the stamp matches

_codex_bootstrap_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The body runs in a subshell so `set -e` etc. never leak into a sourcing shell.
_codex_bootstrap() (
    set -euo pipefail
    root=$1
    with_tests=$2
    venv="$root/.venv"
    req="$root/requirements.txt"
    req_test="$root/requirements-test.txt"
    stamp="$venv/.requirements.sha256"
    stamp_test="$venv/.requirements-test.sha256"
    py=${PYTHON:-python3}

    say() { printf 'bootstrap: %s\n' "$*" >&2; }
    fail() { say "ERROR: $*"; exit 1; }

    [[ -f "$req" ]] || fail "$req not found"

    # Serialise concurrent runs (e.g. parallel make targets).
    if command -v flock >/dev/null 2>&1; then
        exec 9<"$root"
        flock 9
    fi

    venv_ok() {
        [[ -x "$venv/bin/python" ]] &&
            "$venv/bin/python" -c 'import sys; assert sys.version_info >= (3, 10)' >/dev/null 2>&1 &&
            "$venv/bin/python" -m pip --version >/dev/null 2>&1
    }

    if ! venv_ok; then
        command -v "$py" >/dev/null 2>&1 || fail "'$py' not found (set PYTHON=/path/to/python3)"
        "$py" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' 2>/dev/null ||
            fail "$py is $("$py" -V 2>&1); Python >= 3.10 is required"
        if [[ -e "$venv" ]]; then
            say "recreating broken virtualenv at .venv with $("$py" -V 2>&1)"
            "$py" -m venv --clear "$venv" ||
                fail "'$py -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)"
        else
            say "creating virtualenv at .venv with $("$py" -V 2>&1)"
            "$py" -m venv "$venv" ||
                fail "'$py -m venv' failed (Debian/Ubuntu: apt-get install python3-venv)"
        fi
        rm -f "$stamp" "$stamp_test"
        venv_ok || fail "virtualenv at $venv is unusable (no pip? Debian/Ubuntu: apt-get install python3-venv)"
    fi

    # Hash of the given requirement files plus the venv interpreter version.
    digest() {
        {
            cat "$@"
            "$venv/bin/python" -c 'import sys; print(sys.version)'
        } | "$venv/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())'
    }
    install() { # file, stamp (and the runtime stamp too: the test file includes requirements.txt)
        say "installing $(basename "$1") into .venv"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
            "$venv/bin/python" -m pip install --quiet -r "$1" ||
            fail "pip install -r $(basename "$1") failed"
        digest "$req" >"$stamp"
        [[ "$1" == "$req" ]] || digest "$req" "$req_test" >"$stamp_test"
        say "requirements installed"
    }
    stale() { # stamp, files...
        local stamp_file=$1
        shift
        [[ "$(digest "$@")" != "$(cat "$stamp_file" 2>/dev/null || true)" || "${BOOTSTRAP_FORCE:-0}" == "1" ]]
    }

    if [[ "$with_tests" == "1" ]]; then
        [[ -f "$req_test" ]] || fail "$req_test not found"
        if stale "$stamp_test" "$req" "$req_test" || stale "$stamp" "$req"; then
            install "$req_test"
        fi
    elif stale "$stamp" "$req"; then
        install "$req"
    fi
)

_codex_bootstrap_tests=${BOOTSTRAP_TEST:-0}
[[ "${1:-}" == "--test" ]] && _codex_bootstrap_tests=1

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    # Sourced: report status via return, don't exit the caller's shell.
    _codex_bootstrap "$_codex_bootstrap_root" "$_codex_bootstrap_tests"
    _codex_bootstrap_rc=$?
    unset -f _codex_bootstrap
    unset _codex_bootstrap_root _codex_bootstrap_tests
    eval "unset _codex_bootstrap_rc; return $_codex_bootstrap_rc"
else
    _codex_bootstrap "$_codex_bootstrap_root" "$_codex_bootstrap_tests"
fi
