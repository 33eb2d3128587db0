#!/usr/bin/env bash
# Run tests/integrations against one release of a framework the adapters support, in a venv of its own.
#
#   tools/framework_versions.sh DIR lightning==2.6.0 [PIP_SPEC ...] [-- PYTEST_ARGS ...]
#   tools/framework_versions.sh DIR transformers==5.24.0 accelerate==1.7.0 -- -k "not torchrun"
#   tools/framework_versions.sh DIR lightning            # the newest the package index offers
#
# The venv is DIR/<the specs joined by '_'> (made once, reused; keep DIR outside the repository). It gets torch at
# the version of the python running this script (PYTHON, default python3: torch, torchvision), trickbag's own
# dependencies, pytest, and the given specs. trickbag itself is not installed: the tests import this checkout's
# src/ through PYTHONPATH, with TRICKBAG_ANY_FRAMEWORK_RELEASE=1 (the adapters then take a release older than they
# require, to find out whether it works). The tests run are the framework's test files (lightning: test_core.py,
# test_lightning*.py; transformers: test_hf.py; both: test_audit_planted.py), one process, unless PYTEST_ARGS
# names files under tests/. The last line printed is
#   RESULT <specs> | <installed versions> | <pytest's summary line>
# and the exit status is pytest's (or 3: the venv could not be made).
set -u -o pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 DIR FRAMEWORK[==VERSION] [PIP_SPEC ...] [-- PYTEST_ARGS ...]" \
         "(FRAMEWORK: lightning or transformers)" >&2
    exit 2
fi
dir=$1
shift
specs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do specs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
framework=${specs[0]%%[=<>!~]*}
case "$framework" in
    lightning) tests=(tests/integrations/test_core.py tests/integrations/test_lightning*.py
                      tests/integrations/test_audit_planted.py) ;;
    transformers) tests=(tests/integrations/test_hf.py tests/integrations/test_audit_planted.py) ;;
    *) echo "$0: the first spec is '${specs[0]}'; allowed are lightning[==V] or transformers[==V]" >&2; exit 2 ;;
esac
for arg in "$@"; do case "$arg" in tests/*) tests=() ;; esac; done  # PYTEST_ARGS name their own test files

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
name=$(IFS=_; echo "${specs[*]}" | tr -c 'A-Za-z0-9._\n-' '-')
venv=$dir/$name
torch_pins=$("$python" -c "import torch, torchvision
print(f'torch=={torch.__version__.split(\"+\")[0]} torchvision=={torchvision.__version__.split(\"+\")[0]}')") || exit 3

if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.made" ]; then
    mkdir -p "$dir"
    "$python" -m venv --clear "$venv" || exit 3
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip install -q $torch_pins "numpy>=1.24" "PyYAML>=6.0" "pydantic>=2.5" "torchmetrics>=1.3" \
        "pillow>=9.0" "pytest>=7.4" "pytest-timeout>=2.2" "${specs[@]}" || exit 3
    touch "$venv/.made"
fi

installed=$("$venv/bin/python" -c "
import importlib.metadata as m
names = ['$framework', 'accelerate'] if '$framework' == 'transformers' else ['$framework']
print(' '.join(f'{n}=={m.version(n)}' for n in names))")
cd "$repo" || exit 3
log=$(mktemp)
PYTHONPATH="$repo/src" OMP_NUM_THREADS=1 TRICKBAG_ANY_FRAMEWORK_RELEASE=1 \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -o addopts="-ra --timeout=900" \
    "${tests[@]}" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error|skipped|deselected)|no tests ran' "$log" | tail -1 | tr -d '=')
echo "RESULT ${specs[*]} | $installed | ${summary:-no summary (exit $status)}"
rm -f "$log"
exit "$status"
