"""`sinew preview` of a take (engine.motion.preview): the simulated body where the take's body
frames put it, the reference where its q_ref does, the muscles by activation; a contact
sheet or a video; bad requests refused in one line."""
import numpy as np
import pytest

from engine import kinematics as kin
from engine.control.tracking import TrackingParams
from engine.errors import ParameterError
from engine.motion import preview as pv
from engine.take import simulate

from .conftest import MOTION_DIR


@pytest.fixture(scope="module")
def take_dir(rig, tmp_path_factory):
    out = tmp_path_factory.mktemp("take")
    take = simulate(rig, [(MOTION_DIR / "walk.bvh", 0.3)], params=TrackingParams(residual=1.0), fps=30,
                    progress=lambda f: None)
    take.save(out / "take.npz")
    return out, take


def test_the_figures_stand_where_the_take_and_its_reference_put_them(rig, take_dir):
    """The joint centres drawn for the simulated body, found from the recorded body frames,
    equal the forward kinematics of the recorded q (two ways to the same pose); the ghost's are
    q_ref's; the muscles' waypoints sit on the bodies (each segment's ends within a body's
    reach of its centre)."""
    _, take = take_dir
    figs = pv.TakeFigures(take, rig)
    root, local = kin.q_to_pose(rig, take.q)
    _, joints, _, body_pos = kin.forward_kinematics(rig, root, local)
    assert np.abs(figs.joints - joints).max() < 1e-4  # the body frames are stored in float32
    assert np.abs(figs.body_pos - body_pos).max() < 1e-4
    root, local = kin.q_to_pose(rig, take.q_ref)
    assert np.allclose(figs.ref_joints, kin.forward_kinematics(rig, root, local)[1])
    assert not np.allclose(figs.ref_joints, figs.joints, atol=1e-3)  # the ghost is its own pose
    wp = np.array([figs.waypoints(f) for f in range(take.num_frames)])
    reach = np.linalg.norm(wp[:, :, None] - figs.body_pos[:, None], axis=-1).min(-1)
    assert reach.max() < 0.5


def test_the_views_turn_with_the_character(rig, take_dir):
    """The same take turned 90 deg about the vertical and moved elsewhere draws the same
    pictures: the views follow the pelvis and turn with its heading (a walk that turned half
    way round in a minute was seen from its front in the "side" view)."""
    import dataclasses

    from engine.transforms import quat_multiply

    _, take = take_dir
    turn = np.array([np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)])  # 90 deg about +z
    Rz = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    shift = np.array([3.0, -2.0, 0.0])

    def moved(q):
        q = np.array(q, float)
        q[:, :3] = q[:, :3] @ Rz.T + shift
        q[:, 3:7] = quat_multiply(turn, q[:, 3:7])
        return q

    other = dataclasses.replace(take, body_pos=take.body_pos @ Rz.T + shift,
                                body_quat=quat_multiply(turn, take.body_quat), q=moved(take.q), q_ref=moved(take.q_ref))
    a, b = pv.TakeFigures(take, rig), pv.TakeFigures(other, rig)
    assert np.allclose(b.heading, a.heading + np.pi / 2, atol=1e-6)
    for f in range(take.num_frames):
        for pa, pb in ((a.joints[f], b.joints[f]), (a.ref_joints[f], b.ref_joints[f]), (a.waypoints(f), b.waypoints(f))):
            assert np.abs(a.local(f, pa) - b.local(f, pb)).max() < 1e-4


def _frames_and_ms(path) -> tuple[int, float]:
    """A GIF's frame count and its playing time (ms)."""
    from PIL import Image

    gif, total = Image.open(path), 0.0
    for i in range(gif.n_frames):
        gif.seek(i)
        total += gif.info["duration"]
    return gif.n_frames, total


def test_a_take_becomes_a_contact_sheet_and_a_gif(take_dir, tmp_path, capsys):
    from PIL import Image

    from engine.commands.main import main

    folder, take = take_dir
    assert main(["preview", str(folder), "--out", str(tmp_path / "sheet.png"), "--frames", "4"]) == 0
    assert Image.open(tmp_path / "sheet.png").size[0] > 400
    assert main(["preview", str(folder / "take.npz"), "--out", str(tmp_path / "take.gif")]) == 0
    assert _frames_and_ms(tmp_path / "take.gif") == pytest.approx((take.num_frames, 1000 * take.num_frames / take.fps),
                                                                   abs=10)  # in real time, to GIF's 10 ms
    assert "video" in capsys.readouterr().out


def test_a_long_take_shows_every_kth_frame_in_real_time(rig, take_dir, tmp_path, monkeypatch):
    _, take = take_dir
    monkeypatch.setattr(pv, "MAX_VIDEO_FRAMES", 4)
    out, k = pv.take_video(take, rig, tmp_path / "short.gif")
    n = len(range(0, take.num_frames, k))
    assert k == -(-take.num_frames // 4) and _frames_and_ms(out) == pytest.approx((n, 1000 * n * k / take.fps), abs=10)


def test_bad_previews_are_refused_in_one_line(rig, take_dir, tmp_path, capsys):
    from matplotlib import animation

    from engine.commands.main import main

    folder, take = take_dir
    if not animation.writers.is_available("ffmpeg"):
        with pytest.raises(ParameterError, match="ffmpeg"):
            pv.take_video(take, rig, tmp_path / "take.mp4")
        assert not (tmp_path / "take.mp4").exists()
    ref = tmp_path / "walk_ref.npz"
    assert main(["retarget", str(MOTION_DIR / "walk.bvh"), "--out", str(ref)]) == 0
    assert main(["preview", str(ref), "--out", str(tmp_path / "ref.gif")]) == 2
    assert "a video is made of a take" in capsys.readouterr().err
    assert main(["preview", str(folder), "--out", str(folder / "take.npz")]) == 2  # its own input
    assert main(["preview", str(folder), "--out", str(tmp_path / "sheet.txt")]) == 2
    assert (folder / "take.npz").stat().st_size > 1000
