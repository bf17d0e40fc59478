#!/usr/bin/env bash
# Screenshots of the built docs site, as a reader's browser shows it: the home page, the
# "Which entry point?" page and one study page, from headless Chromium at 1280 x 1600,
# reduced to a 256-colour palette (each under 300 KB) in docs/assets/screenshots/.
#
#   bash .ci/screenshots.sh            # CHROMIUM=/path/to/chromium to use another browser
#
# Exit status: that of the first failing step.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
browser="${CHROMIUM:-/usr/bin/chromium}"
out="$repo/docs/assets/screenshots"
mkdir -p "$out"
cd "$repo"
python -m mkdocs build -q -d "$site"
for page in "home:index.html" "entry_points:entry_points/index.html" \
            "study:studies/hierarchical_logistic_tfp/index.html"; do
  name="${page%%:*}"
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1280,1600 --screenshot="$out/$name.png" "file://$site/${page#*:}" 2>/dev/null
  python - "$out/$name.png" <<'PY'
import sys
from PIL import Image

path = sys.argv[1]
Image.open(path).convert("RGB").quantize(256).save(path, optimize=True)
PY
done
ls -l "$out"
