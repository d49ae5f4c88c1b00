#!/usr/bin/env bash
# Render the site's icon (codex_site/static/codex/icon.svg) as the PNG that serverInfo, the server
# card and server.json offer beside it (mcp_endpoint.identity: ICON_PNG, ICON_PNG_SIZE), with
# headless Chromium on a transparent background. Run it after changing the SVG, and commit both.
#
#   bash scripts/render_icon.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIZE=256
SVG="$ROOT/codex_site/static/codex/icon.svg"
PNG="$ROOT/codex_site/static/codex/icon-$SIZE.png"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[[ -n "$CHROMIUM" ]] || { echo "render_icon: needs chromium (apt-get install chromium)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$SVG" "$work/icon.svg"
printf '<!doctype html><style>html,body{margin:0;background:transparent}img{display:block;width:%dpx;height:%dpx}</style><img src="icon.svg">' \
    "$SIZE" "$SIZE" >"$work/icon.html"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars --default-background-color=00000000 \
    --window-size="$SIZE,$SIZE" --screenshot="$work/icon.png" "file://$work/icon.html" >/dev/null 2>&1
mv "$work/icon.png" "$PNG"
echo "wrote $PNG (${SIZE}x$SIZE)"
