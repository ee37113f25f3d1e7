#!/usr/bin/env bash
# Issue 20's long DAgger run on a lent 16-core GPU machine (the workplace's `device` tool), in
# one call: install the carried wheels, put the walk where ${shared_motion} points, train
# (walk_16core.toml: four planners averaged, smooth 0, 15 episode workers, 2 rounds), and bring
# back the log, curves, the exported policy, the labels without their moment arms (float32,
# parts under 16 MiB) and the fit's steps/s on CPU and CUDA (fit_speed.py).
#
# Prepared in the twenty-third session and never run: status said a machine was lent, and the
# call was refused ("no new device machine is lent at present"). Before calling, in the
# repository's root on the CPU machine (the device has Python 3.12, torch, numpy, scipy,
# matplotlib, threadpoolctl, but no MuJoCo or DAQP, and reaches no registry):
#   echo /.whl/ >> .git/info/exclude; echo /.walk/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     -d .whl mujoco mujoco-core mujoco-studio glfw pyopengl daqp     # ~26 MB, same versions as the venv
#   mkdir -p .walk && cp ../shared/reference/mass/motion/walk.bvh .walk/
# then run `bash research/device_dagger/run.sh` with carry [".whl", ".walk"] and a
# timeout of ~598 s. Sizing, from benchmarks/training_throughput.py on a 2-core machine (the
# tracker at 1.6x real time there): four planners give ~0.57 labels/s a core and the snapshot
# take at the start (snapshot_seconds) runs in one process, so a faster core matters as much
# as the count: measure one episode first if the machine is new.
set -u
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD OPENBLAS_NUM_THREADS=1 PYTHONUNBUFFERED=1 MUJOCO_GL=disable
mkdir -p ../shared/reference/mass/motion && cp .walk/walk.bvh ../shared/reference/mass/motion/
nproc; python3 -c "import sys, numpy, torch, mujoco, daqp; print(sys.version, numpy.__version__, torch.__version__, mujoco.__version__)"
echo "setup $(( $(date +%s) - t0 )) s"
RUN=/tmp/run
timeout ${TRAIN_LIMIT:-525} python3 -m engine train --config research/device_dagger/walk_16core.toml --out $RUN 2>&1 | tee $OUT/train.txt
echo "train rc ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
cp $RUN/log.csv $OUT/ 2>/dev/null; cp $RUN/*.png $OUT/ 2>/dev/null
python3 research/device_dagger/pack_labels.py $RUN $OUT
python3 -m engine export-policy $RUN --out $OUT/walk16.npz 2>&1 | tail -3
timeout 25 python3 research/device_dagger/fit_speed.py research/device_dagger/walk_16core.toml 2>&1 | tee $OUT/fit_speed.txt
ls -la $RUN $OUT; echo "done $(( $(date +%s) - t0 )) s"
