# Set-up and everyday commands. `make demo` and `make test` create the virtual
# environment on first use; nothing else needs installing by hand.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.sinew-installed
OUT    ?= out
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: demo test bench rig clean venv extension test-blender blender-full blender-smoke blender-envs compiled test-numpy2

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile tools/link_ode.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU torch first, pinned: an unpinned torch would pull several GB of CUDA packages.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[train,test]'
	bash tools/link_ode.sh $(PY)
	touch $(STAMP)

MASS_MOTION := ../shared/reference/mass/motion

# A policy taught by the stand controller (sinew train --config stand).
STAND_POLICY := docs/results/dagger_stand_2026-11-24/stand.npz

demo: $(STAMP)
	mkdir -p $(OUT)
	$(VENV)/bin/sinew info
	$(VENV)/bin/sinew fatigue-curve --load 0.5 --on 20 --off 40 --F 0.1 --R 0.02 --out $(OUT)/fatigue_curve.png
	$(VENV)/bin/sinew fatigue-curve --load 0.3 --on 600 --off 300 --out $(OUT)/fatigue_curve_slow_twitch.png
	$(VENV)/bin/sinew retarget $(MASS_MOTION)/walk.bvh --out $(OUT)/walk_ref.npz
	$(VENV)/bin/sinew preview $(OUT)/walk_ref.npz --out $(OUT)/walk_sheet.png
	$(VENV)/bin/sinew arm-hold --out $(OUT)/arm_hold
	$(VENV)/bin/sinew simulate --clip $(MASS_MOTION)/walk.bvh:60 --fatigue-scale 50 --balance --out $(OUT)/tired_walk
	$(VENV)/bin/sinew preview $(OUT)/tired_walk --out $(OUT)/tired_walk.gif
	$(VENV)/bin/sinew simulate --clip $(MASS_MOTION)/walk.bvh@0.25:60 --residual 0 --fatigue-scale 50 --out $(OUT)/held_pose
	$(VENV)/bin/sinew simulate --clip $(MASS_MOTION)/walk.bvh@0.5:30 --controller policy --policy $(STAND_POLICY) --out $(OUT)/stand_policy
	$(PY) scripts/demo_scene.py $(MASS_MOTION)/walk.bvh $(OUT)/demo_scene.blend
	$(VENV)/bin/sinew bake $(OUT)/demo_scene.blend --armature walk --clip $(MASS_MOTION)/walk.bvh:5 --fatigue-scale 50 --out $(OUT)/fatigued_take.blend
	$(PY) scripts/render_preview.py $(OUT)/fatigued_take.blend $(OUT)/fatigued_take.png --size 640x360 --samples 16
	$(VENV)/bin/sinew bench --seconds 2 --policy $(STAND_POLICY)
	@echo "demo outputs in $(OUT)/"

# The suite runs on the compiled muscle step; the simulation tests run again on the numpy
# step it falls back to (SINEW_COMPILED=0).
NUMPY_PATH_TESTS := tests/test_physics.py tests/test_arm_hold.py tests/test_muscle_step.py \
	tests/test_simulation.py tests/test_tracking.py tests/test_training.py tests/test_compiled.py

# numpy 2: the project's venv holds numpy 1.26 (bpy pins it), but `pip install` of the engine
# elsewhere gets numpy 2, whose repr of its scalars once broke the MuJoCo model the engine
# writes. The engine's simulation tests run again in a venv with the newest numpy (no torch,
# no bpy, no ODE: those tests skip).
NUMPY2_VENV  := .venv-numpy2
NUMPY2_STAMP := $(NUMPY2_VENV)/.sinew-installed
NUMPY2_TESTS := tests/test_physics.py tests/test_rig.py tests/test_muscle_step.py tests/test_simulation.py \
	tests/test_tracking.py tests/test_compiled.py tests/test_retarget.py tests/test_bvh.py tests/test_policy.py

$(NUMPY2_STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(NUMPY2_VENV)
	$(NUMPY2_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(NUMPY2_VENV)/bin/python -m pip install --quiet 'numpy>=2' -e . pytest hypothesis
	touch $@

test-numpy2: $(NUMPY2_STAMP)
	$(NUMPY2_VENV)/bin/python -m pytest -q -p no:cacheprovider $(NUMPY2_TESTS)

# pytest-xdist: a test file per core (--dist loadfile keeps a file's fixtures in one process).
test: $(STAMP) blender-envs extension $(NUMPY2_STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile --ignore=tests/blender
	SINEW_COMPILED=0 $(PY) -m pytest -q -n 2 --dist loadfile $(NUMPY_PATH_TESTS)
	$(MAKE) test-numpy2
	$(BLENDER_TESTS)

bench: $(STAMP) blender-envs extension
	$(VENV)/bin/sinew bench --seconds 5
	$(PY) benchmarks/coordination_solvers.py --seconds 5
	$(PY) benchmarks/retarget_10min.py
	$(PY) benchmarks/blender_display.py --repeat 3
	$(PY) benchmarks/blender_vs_cli.py --bpy $(BLENDER_ENVS)/bpy-$(BPY_FULL)
	$(PY) benchmarks/long_take.py    # 10 min of the walk at fatigue scale 1: ~10-15 min wall
	$(PY) benchmarks/training_throughput.py   # training: samples, updates, DAgger labels and fit steps a second

# One Blender extension zip per platform into dist/, validated (runtime wheels cached in dist/wheels).
extension: $(STAMP)
	$(PY) tools/build_extension.py

# ---- Blender-like Pythons -------------------------------------------------------------------
# The Blender tests run where the add-on sees only what Blender has: one virtual environment
# per bpy version holding bpy, what bpy pulls in (numpy pinned to the one that Blender
# bundles) and pytest, nothing of the project. The tests install the built zip into a
# temporary Blender user folder. The whole Blender suite runs on BPY_FULL, the smoke path
# (install, retarget, simulate 1 s, bake, cancel, reopen) on BPY_SMOKE. `python -I`: neither
# the working directory nor PYTHON* variables reach it; no OPENBLAS_NUM_THREADS either, as in
# Blender (the extension caps BLAS threads itself).
BLENDER_ENVS ?= .blender
BPY_FULL     ?= 4.5.15
BPY_SMOKE    ?= 4.2.23 5.0.1
BPY_PYTEST   := pytest==9.2.0
# Blender 4.2 bundles numpy 1.24.3 and its bpy wheel does not pin it; 4.5 and 5.0 bundle 1.26.4.
bpy_numpy = $(if $(filter 4.2.%,$(1)),1.24.3,1.26.4)
BLENDER_STAMPS := $(foreach v,$(BPY_FULL) $(BPY_SMOKE),$(BLENDER_ENVS)/bpy-$(v)/.installed)
BLENDER_PYTEST = cd tests/blender && env -u OPENBLAS_NUM_THREADS SINEW_EXTENSION_ZIP=$(LINUX_ZIP) \
	../../$(BLENDER_ENVS)/bpy-$(1)/bin/python -I -m pytest -p no:cacheprovider -o tmp_path_retention_policy=failed --confcutdir . --import-mode=importlib -q
# The full Blender suite on one core and the smoke suites on the other (each output kept whole).
BLENDER_TESTS = $(MAKE) --no-print-directory -j2 --output-sync=target blender-full blender-smoke
LINUX_ZIP = $(CURDIR)/dist/sinew-$(shell sed -n 's/^version = "\(.*\)"/\1/p' blender_manifest.toml)-linux_x64.zip

blender-envs: $(BLENDER_STAMPS)

$(BLENDER_ENVS)/bpy-%/.installed:
	rm -rf $(BLENDER_ENVS)/bpy-$*
	$(PYTHON) -m venv $(BLENDER_ENVS)/bpy-$*
	$(BLENDER_ENVS)/bpy-$*/bin/python -m pip install --quiet --no-cache-dir "bpy==$*" "numpy==$(call bpy_numpy,$*)" "$(BPY_PYTEST)"
	touch $@

test-blender: $(STAMP) blender-envs extension
	$(BLENDER_TESTS)

blender-full:
	$(call BLENDER_PYTEST,$(BPY_FULL))

blender-smoke:
	for v in $(BPY_SMOKE); do ($(call BLENDER_PYTEST,$$v) -m smoke) || exit 1; done

# Rebuild the compiled library for all four platforms (engine/native/, committed) after
# editing engine/native/*.c; Zig comes from PyPI into its own .venv-build.
compiled:
	test -x .venv-build/bin/python || $(PYTHON) -m venv .venv-build
	.venv-build/bin/python -m pip install --quiet ziglang==0.17.1
	.venv-build/bin/python tools/build_native.py

# Rebuild rigs/human284/*.npz from ../shared/reference/mass.
rig: $(STAMP)
	$(PY) rigs/human284/convert.py

clean:
	rm -rf $(VENV) $(NUMPY2_VENV) $(OUT) .pytest_cache $(BLENDER_ENVS)
