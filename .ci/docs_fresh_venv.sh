#!/usr/bin/env bash
# The docs site from a fresh virtual environment: install with the README's docs command
# (`pip install -e ".[docs]"`, pinned by constraints.txt as in CI) into a new venv, build
# the site in strict mode with that venv's mkdocs, and run the checks of
# .ci/check_docs.py on the built HTML. A docs dependency that the `docs` extra forgets
# fails here even when the developer's own environment happens to have it.
#
#   bash .ci/docs_fresh_venv.sh        # .ci/run starts it in the background
#
# pip installs from its index and cache as configured; the build itself fetches nothing
# (KaTeX is vendored under docs/assets). Exit status: that of the first failing step.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py="${PYTHON:-python}"
start=$SECONDS

"$py" -m venv "$work/venv"
vbin="$work/venv/bin"
cd "$repo"
# pip's own output (resolver notes, index warnings) is shown only when it fails.
if ! "$vbin/python" -m pip install -q -e ".[docs]" -c constraints.txt >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  echo "docs fresh venv: pip install -e \".[docs]\" -c constraints.txt failed" >&2
  exit 1
fi
echo "docs fresh venv: venv and install took $((SECONDS - start)) s"

# tests/test_docs_blocks.py runs the README's and the pages' blocks as after the README's
# install by hiding the optional extras' modules from blocks that do not name their extra.
# That holds only while the install without extras (this venv: the core set + mkdocs) really
# lacks them; a core dependency that starts to pull one in fails here.
"$vbin/python" - <<'PY'
import importlib.util, sys
present = [m for m in ("arviz", "sklearn", "ray") if importlib.util.find_spec(m) is not None]
if present:
    sys.exit(f"docs fresh venv: the install without extras has {present}; "
             "update EXTRA_MODULES in tests/test_docs_blocks.py")
PY

NO_MKDOCS_2_WARNING=1 "$vbin/mkdocs" build --strict --quiet --site-dir "$work/site"
"$vbin/python" .ci/check_docs.py --site "$work/site"
echo "docs fresh venv: strict build and site checks passed, $((SECONDS - start)) s in all"
