#!/usr/bin/env bash
# Patroni, pinned (deploy/patroni/requirements.txt), in a virtual environment of its own:
#
#   bash deploy/patroni/install.sh DIR     # DIR/bin/patroni and DIR/bin/patronictl
#
# Nothing is done when DIR already holds exactly these pins. The environment is readable by
# every user, and made from the system's Python (Debian's /usr/bin/python3, with python3-venv):
# the postgres user runs Patroni from it, and a Python of root's own (pyenv) is not theirs to run.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DIR=${1:?usage: install.sh DIR}
REQUIREMENTS="$HERE/requirements.txt"

if [[ -x "$DIR/bin/patroni" ]] && cmp -s "$REQUIREMENTS" "$DIR/requirements.txt"; then
    exit 0
fi
rm -rf "$DIR"
mkdir -p "$(dirname "$DIR")"
PYTHON=${PATRONI_PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || {
    echo "install.sh: $PYTHON cannot make a virtual environment (apt-get install python3-venv)" >&2
    exit 3
}
"$PYTHON" -m venv "$DIR"
"$DIR/bin/python" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS"
cp "$REQUIREMENTS" "$DIR/requirements.txt"
chmod -R a+rX "$DIR"
"$DIR/bin/patroni" --version
