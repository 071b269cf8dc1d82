#!/usr/bin/env bash
# The first-CUDA-run checks in one command (docs/gpu.md holds what they measured):
#     bash docs/gpu_check.sh OUT [STAGE ...]
# stages: env tiny real big fallback experts kernels speed fp8 int8
# On a machine without paradit's dependencies, put their wheels in .whl/ (the repo's root);
# they are installed into a private folder, never over the machine's own packages.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: gpu_check.sh OUT [STAGE ...]}"
shift
mkdir -p "$out"
site="$(mktemp -d)"
if compgen -G "$root/.whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site/lib" "$root"/.whl/*.whl || exit 1
fi
mkdir -p "$site/pkg" && ln -sfn "$root" "$site/pkg/paradit"  # the repo's root is the package
export PYTHONPATH="$site/pkg:$site/lib${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export PARADIT_LOG="${PARADIT_LOG:-INFO}" HF_HUB_OFFLINE=1 GPU_CHECK_WORK="$site/work"
python3 "$root/docs/gpu_check.py" "$out" "$@" 2>&1 | tee "$out/gpu_check.log"
status=${PIPESTATUS[0]}
tar -czf "$out/serve-logs.tgz" -C "$site/work" $(cd "$site/work" && ls *.log 2>/dev/null)
exit "$status"
