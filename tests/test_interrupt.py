"""Nothing lost (issue 19): Ctrl-C / SIGTERM keep what was simulated or trained, a failed
write leaves the previous file as it was, output paths are checked before any work."""
import json
import os
import re
import pty
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from engine import fatigue as fat
from engine.errors import OutputPathError

from .conftest import MASS, REPO
from .test_cli import last_json, sinew

WALK = MASS / "motion" / "walk.bvh"
SINEW = [sys.executable, "-m", "engine"]


class StopAfter:
    """A StopFlag that asks to stop after `n` reads (a loop reads it once per step)."""

    def __init__(self, n: int, reason="interrupted by SIGINT"):
        self.n, self.reason = n, reason

    @property
    def requested(self) -> bool:
        self.n -= 1
        return self.n < 0


# ---- the stop flag in the loops ---------------------------------------------------------------
def test_an_interrupted_take_holds_the_frames_up_to_the_stop(rig):
    from engine.take import simulate

    steps = 100  # the loop reads the flag before each step: 100 steps run
    take = simulate(rig, [(WALK, 2.0)], fatigue=fat.FatigueParams(scale=50), fps=30, stop=StopAfter(steps))
    m = take.meta
    assert m["interrupted"] and m["partial"] and not m["fell"] and not m["diverged"]
    assert m["simulated_seconds"] == pytest.approx(steps / 120) and m["stopped_at_s"] == pytest.approx(steps / 120)
    assert m["stop_reason"] == "interrupted by SIGINT at t = 0.83 s"
    assert np.allclose(take.times, np.arange(0, steps / 120 + 1e-9, 1 / 30))  # every frame up to the stop
    assert m["summary"]["partial"] and m["summary"]["seconds"] == pytest.approx(steps / 120, abs=1e-4)


def test_arm_hold_stopped_early_keeps_its_series_and_says_what_it_did_not_reach(rig):
    from engine.experiments.arm_hold import ArmHoldSetup, run_arm_hold

    r = run_arm_hold(rig, ArmHoldSetup(hold=3.0, rest=1.0, rehold=1.0), stop=StopAfter(int(2.5 * 120)))
    s = r["summary"]  # the flag is read before each step, as a take reads it: 300 steps run
    assert s["partial"] and s["simulated_seconds"] == pytest.approx(2.5, abs=1e-4)
    assert r["series"]["time_s"][-1] == pytest.approx(s["simulated_seconds"], abs=1e-4)
    assert s["elevation_start_deg"] is not None  # reached at 2 s
    assert s["elevation_end_hold_deg"] is None and s["shoulder_MF_end_rest"] is None  # not reached


def test_signals_set_the_flag_once_then_stop_at_once_and_handlers_come_back():
    from engine.interrupt import stop_on_signals

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert stop.requested and stop.exit_code == 143 and stop.name == "SIGTERM"
        with pytest.raises(KeyboardInterrupt):  # a second signal: the run hangs, stop now
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
    assert {s: signal.getsignal(s) for s in before} == before


# ---- the commands, as a user stops them -------------------------------------------------------
def _run_and_signal(cmd, sig, cwd, ready=b"%", whole_group=False, timeout=240):
    """Run `cmd` with stderr on a terminal (so it shows its progress bar), send `sig` once the
    bar shows (the run is under way; `ready`: bytes, or a compiled pattern, to wait for),
    return (exit status, stdout, stderr)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, start_new_session=True)
    os.close(slave)
    err, sent, t0 = b"", False, time.time()
    while True:
        if not sent and (ready.search(err) if hasattr(ready, "search") else ready in err):
            (os.killpg if whole_group else os.kill)(p.pid, sig)  # a terminal's Ctrl-C reaches the group
            sent = True
        r, _, _ = select.select([master], [], [], 1.0)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            err += chunk
        elif p.poll() is not None:
            break
        assert time.time() - t0 < timeout, err.decode(errors="replace")
    os.close(master)
    out = p.stdout.read().decode()
    p.wait(timeout=60)
    assert sent, "the run ended before it showed progress: " + err.decode(errors="replace")
    return p.returncode, out, err.decode(errors="replace").replace("\r", "\n")


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_simulate_stopped_by_a_signal_keeps_a_partial_take(tmp_path, sig, code):
    from engine.take import load_take

    out = tmp_path / "take"
    # the default take plans its balance in worker processes (~15 s a simulated second): the
    # signal comes once 1 % of the minute is done, and the workers must end with the take
    rc, stdout, stderr = _run_and_signal(SINEW + ["simulate", "--clip", f"{WALK}:60", "--out", str(out), "--json"],
                                         sig, REPO, ready=re.compile(rb" [1-9][0-9]?\.[0-9]%"),
                                         whole_group=sig == signal.SIGINT)
    assert rc == code, stderr
    assert "Traceback" not in stderr
    last = [ln for ln in stderr.splitlines() if ln.strip()][-1]
    name = signal.Signals(sig).name
    assert last.startswith(f"sinew simulate: stopped by {name} at t = ") and "kept the partial take" in last
    take = load_take(out / "take.npz")
    m = take.meta
    assert m["partial"] and m["interrupted"] and m["stop_reason"].startswith(f"interrupted by {name} at t = ")
    t_stop = m["stopped_at_s"]
    assert 0.5 < t_stop < 60  # signalled at 1 % or more: 0.6 s
    # every frame up to the stop, none after it
    assert np.allclose(take.times, np.arange(take.num_frames) / 30) and 0 <= t_stop - take.times[-1] < 1 / 30
    assert json.loads(stdout.strip().splitlines()[-1])["partial"] is True
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["partial"] and report["meta"]["stopped_at_s"] == t_stop
    assert "stopped early" in (out / "report.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["activation.png", "fatigue.png", "gait.png", "report.json",
                                                     "report.md", "take.npz"]  # no temporary files left


def test_train_stopped_by_ctrl_c_keeps_a_checkpoint_that_resumes(tmp_path):
    pytest.importorskip("torch")
    from training.trainer import load_checkpoint

    run = tmp_path / "run"
    rc, stdout, stderr = _run_and_signal(SINEW + ["train", "--config", "tiny", "--out", str(run), "--iterations", "50"],
                                         signal.SIGINT, REPO, ready=b"training [", whole_group=True)
    assert rc == 130 and "Traceback" not in stderr, stderr
    last = [ln for ln in stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("sinew train: stopped by SIGINT after iteration ") and "--resume" in last
    done = load_checkpoint(run)["iteration"]
    assert 1 <= done < 50
    r = sinew("train", "--out", str(run), "--resume", "--iterations", str(done + 1), "--json")
    assert last_json(r)["iterations"] == done + 1
    assert load_checkpoint(run)["iteration"] == done + 1


def test_a_ctrl_c_that_nothing_catches_is_one_line(monkeypatch, capsys):
    from engine.commands import main as cli

    def boom(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_info", boom)
    assert cli.main(["info"]) == 130
    assert capsys.readouterr().err == "sinew info: interrupted; nothing more was written\n"


# ---- writes are atomic ------------------------------------------------------------------------
def _fail_midway(monkeypatch, module, name, target_arg=0):
    """Replace module.name by a writer that writes half a file to its argument `target_arg`
    (a path or a file object), then fails."""

    def half(*a, **k):
        target = a[target_arg]
        if hasattr(target, "write"):
            target.write(b"PK\x03\x04 half a file")
        else:
            with open(target, "wb") as f:
                f.write(b"PK\x03\x04 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, name, half)


def test_a_take_write_that_fails_midway_leaves_the_previous_file(rig, tmp_path, monkeypatch):
    from engine.take import load_take, simulate

    take = simulate(rig, [(WALK, 0.2)], fatigue=fat.FatigueParams(scale=0), fps=30)
    path = take.save(tmp_path / "take.npz")
    good = path.read_bytes()
    _fail_midway(monkeypatch, np, "savez_compressed")
    with pytest.raises(OSError, match="No space"):
        take.save(path)
    assert path.read_bytes() == good and load_take(path).num_frames == take.num_frames
    assert [p.name for p in tmp_path.iterdir()] == ["take.npz"]  # the temporary file is gone


def test_text_plots_and_checkpoints_are_renamed_into_place(tmp_path, monkeypatch):
    from engine import atomic
    from engine.figures import pyplot, save

    p = atomic.write_text(tmp_path / "report.json", '{"ok": 1}')
    with pytest.raises(RuntimeError):
        with atomic.atomic_open(p, "w") as f:
            f.write('{"half')
            raise RuntimeError("killed")
    assert p.read_text() == '{"ok": 1}'
    p.chmod(0o640)
    atomic.write_text(p, "{}")  # a replaced file keeps its mode
    assert p.read_text() == "{}" and p.stat().st_mode & 0o777 == 0o640
    png = save(pyplot().figure(), tmp_path / "plot.png")
    good = png.read_bytes()
    assert good.startswith(b"\x89PNG")
    fig = pyplot().figure()
    _fail_midway(monkeypatch, type(fig), "savefig", target_arg=1)
    with pytest.raises(OSError):
        save(fig, png)
    assert png.read_bytes() == good
    assert sorted(x.name for x in tmp_path.iterdir()) == ["plot.png", "report.json"]


def test_a_checkpoint_write_that_fails_midway_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from training.config import load_config
    from training.trainer import Trainer, load_checkpoint

    cfg = load_config("tiny", WALK.parent)
    cfg.workers, cfg.eval_every = 0, 0
    tr = Trainer(cfg, tmp_path)
    ck = tr.save()
    tr.iteration = 5
    _fail_midway(monkeypatch, torch, "save", target_arg=1)
    with pytest.raises(OSError):
        tr.save()
    assert load_checkpoint(ck)["iteration"] == 0
    assert [x.name for x in tmp_path.iterdir()] == ["checkpoint.pt"]


# ---- output paths checked before any work -----------------------------------------------------
def test_output_paths_are_checked_with_one_line(tmp_path):
    from engine.atomic import check_out_dir, check_out_file

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(OutputPathError, match=f"^{a_file}: is a file, not a folder"):
        check_out_dir(a_file)
    with pytest.raises(OutputPathError, match=f"^{a_file / 'sub'}: cannot create this folder: {a_file} is a file"):
        check_out_dir(a_file / "sub")
    with pytest.raises(OutputPathError, match=f"^{tmp_path}: is a folder; give --out a file name"):
        check_out_file(tmp_path)
    assert check_out_dir(tmp_path / "new" / "deep").is_dir()
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(OutputPathError, match="cannot write in this folder"):
            check_out_dir(locked)
        with pytest.raises(OutputPathError, match="cannot create this folder"):
            check_out_dir(locked / "sub")


@pytest.mark.parametrize("command", [
    ["simulate", "--clip", str(WALK), "--out", "{file}"],
    ["arm-hold", "--out", "{file}"],
    ["retarget", str(WALK), "--out", "{dir}"],
    ["fatigue-curve", "--out", "{file}/x.png"],
])
def test_commands_refuse_an_unwritable_out_before_any_work(tmp_path, command):
    (tmp_path / "f").write_text("keep me")
    cmd = [c.format(file=tmp_path / "f", dir=tmp_path) for c in command]
    r = sinew(*cmd, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(tmp_path) in r.stderr, r.stderr
    assert (tmp_path / "f").read_text() == "keep me"
