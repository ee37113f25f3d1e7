"""Where a clip's ground force would have to act: the centre of pressure its momentum asks for,
against where its stance foot is (balance.md, nineteenth session).

For every frame of one loop of a clip as a take plays it (grounded, low-passed), from MuJoCo's
subtree momentum on the clip's own poses and velocities: the ground force f = dp/dt - m g and
the rate of change of the angular momentum about the centre of mass dL/dt. A force from the
floor (z = 0) at p gives (p - c) x f about the centre of mass c, so the horizontal parts of
dL/dt fix p (the free moment about the vertical aside):

    p_x = c_x - (dL_y/dt + c_z f_x) / f_z,     p_y = c_y + (dL_x/dt - c_z f_y) / f_z

Printed in the heading frame, metres from the centre of mass (forward, left), beside the
fore-aft and lateral extent of the foot corners within 2 cm of the floor, for frames where
the vertical force is at least 0.2 body weights.

    python research/stance_cop.py run
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import mujoco
import numpy as np

from engine.control.plan import PHYSICS_HZ, MotionPlan, load_clip
from engine.motion.reference import foot_points
from engine.rig import load_rig


# a foot corner this close to the floor counts as touching it (engine.motion.reference's rule
# when this was measured; the engine now asks for a planted foot: reference.planted)
CONTACT_HEIGHT_M = 0.02


def main(name: str) -> None:
    rig = load_rig()
    motion = Path(__file__).resolve().parents[2] / "shared" / "reference" / "mass" / "motion"
    ref, _ = load_clip(rig, motion / f"{name}.bvh")
    plan = MotionPlan(rig, [(ref, 1.0, name)])
    clip = plan.segments[0].clip
    model, data = plan.space.model, mujoco.MjData(plan.space.model)
    mass, weight = model.body_subtreemass[1], model.body_subtreemass[1] * 9.81

    def state(k):
        q, v, _ = clip.sample(k)
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_forward(model, data)
        mujoco.mj_subtreeVel(model, data)
        return (data.subtree_com[1].copy(), data.subtree_linvel[1] * mass, data.subtree_angmom[1].copy(),
                data.xipos[1:].copy(), data.ximat[1:].reshape(-1, 3, 3).copy())

    S = [state(k) for k in range(clip.frames + 2)]
    for k in range(1, clip.frames + 1):
        c, p_lin, _, pos, rot = S[k]
        f = (S[k + 1][1] - S[k - 1][1]) * PHYSICS_HZ / 2 + np.array([0.0, 0.0, weight])
        dL = (S[k + 1][2] - S[k - 1][2]) * PHYSICS_HZ / 2
        if f[2] < 0.2 * weight:
            continue
        cop = np.array([c[0] - (dL[1] + c[2] * f[0]) / f[2], c[1] + (dL[0] - c[2] * f[1]) / f[2]])
        corners = np.concatenate([foot_points(rig, rot[None], pos[None], side)[0] for side in ("R", "L")])
        down = corners[corners[:, 2] < CONTACT_HEIGHT_M]
        head = p_lin[:2] / np.linalg.norm(p_lin[:2])
        fwd = lambda p: float(np.dot(p[:2] - c[:2], head))
        left = lambda p: float(np.cross(head, p[:2] - c[:2]))
        foot = (f"foot forward [{min(map(fwd, down)):+.2f}, {max(map(fwd, down)):+.2f}] left "
                f"[{min(map(left, down)):+.2f}, {max(map(left, down)):+.2f}]") if len(down) else "no foot down"
        print(f"{k:3d}  vertical {f[2] / weight:3.1f} BW  centre of pressure needed: forward {fwd(cop):+.2f} "
              f"left {left(cop):+.2f}  {foot}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "run")
