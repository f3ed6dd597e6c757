#!/usr/bin/env bash
# benchmarks/gpu_run.py's measurement on a machine with one GPU, in one command, from the
# repository's root (about 7 minutes on an H200; benchmarks/gpu_rows.py holds each row's estimate).
#
#   bash benchmarks/gpu_session.sh wheels   # on a machine that reaches PyPI: the wheels a GPU
#                                           # machine without network lacks, into .whl/
#   bash benchmarks/gpu_session.sh          # on the GPU machine: set up, then measure
#
# The GPU machine is expected to hold Python with JAX and its CUDA plugin, Flax, Optax, Orbax and
# NumPy (an image built for JAX), and no network: seqjax runs from this checkout (PYTHONPATH), and
# the few of its requirements such an image lacks (grain, array-record, portpicker, tensorboardX,
# zstandard) are installed from .whl/ when missing. Arguments after the first go to `gpu_run.py
# measure` (--rows, --budget). Progress is printed as each row finishes; the results go to
# benchmarks/results/gpu_run_measured.json and, where the variable OUT names a folder, are copied
# there with the log.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WHEELS=(grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 tensorboardX==2.6.5 zstandard==0.25.0)

if [ "${1:-}" = wheels ]; then
    # The GPU machine's Python (3.12 on the machines measured so far) and a manylinux x86-64 build.
    version=${WHEEL_PYTHON:-3.12}
    platforms=()
    for tag in manylinux_2_28_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
        platforms+=(--platform "$tag")
    done
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version "$version" --implementation cp \
        "${platforms[@]}" -d .whl "${WHEELS[@]}"
    exit
fi

start=$(date +%s)
if ! "$PYTHON" -c "import grain, tensorboardX, zstandard" 2>/dev/null; then
    if ! ls .whl/*.whl >/dev/null 2>&1; then
        echo "seqjax's requirements grain, tensorboardX or zstandard are missing and .whl/ holds no wheel:" \
            "run 'bash benchmarks/gpu_session.sh wheels' where PyPI is reached and bring .whl/ along" >&2
        exit 1
    fi
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target /tmp/seqjax_site .whl/*.whl
    export PYTHONPATH=/tmp/seqjax_site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
"$PYTHON" -c "import seqjax, jax; print('seqjax from', seqjax.__file__, '; JAX', jax.__version__)"
echo "set up in $(($(date +%s) - start)) s"

log=/tmp/gpu_run_measure.log
status=0
"$PYTHON" benchmarks/gpu_run.py measure "${@}" 2>&1 | tee "$log" || status=$?
echo "measured in $(($(date +%s) - start)) s (exit $status)"
if [ -n "${OUT:-}" ]; then
    cp benchmarks/results/gpu_run_measured.json "$log" "$OUT"/
fi
exit "$status"
