"""A take in a few short notes, written once for every front end: the fall, calibration poses
skipped, clips exported in place, feet levelled onto their soles, how the character stood, balanced, tired, slowed, came
through pushes and met heading goals, and clips asking more than the body can do, each from
the take's meta. The Blender operator says them in the status bar and the sidebar's last
report (`bake_message`); `sinew simulate` and `sinew bake` print them as their "in short"
line (`notes`)."""
from __future__ import annotations

from pathlib import Path


def notes(take) -> list[str]:
    """The take's notes that apply, in the order a reader wants them (the clips beyond the
    body last)."""
    found = [note(take) for note in (fall_note, calibration_note, root_path_note, feet_note, stand_note, balance_note,
                                     tiring_note, pace_note, push_note, heading_note, clips_beyond_the_body)]
    return [n for n in found if n]


def bake_message(take, info: dict) -> tuple[str, bool]:
    """(the report line, whether it warns): the bake's summary (`info` from the add-on's
    bake_take) and the take's notes."""
    summ = take.meta.get("summary", {})
    msg = (f"Sinew: baked {info['frames']} frames into '{info['action']}'"
           + (" (the character fell; kept up to the fall)" if summ.get("fell") else ""))
    for note in notes(take):
        msg += "; " + note
    return msg, bool(clips_beyond_the_body(take))


def clips_beyond_the_body(take) -> str:
    """A warning naming the take's clips that ask more than the muscles and the ground can
    give (engine.control.demands), or '' when none does."""
    from .control.demands import demanding, figures

    parts = [f"{Path(d['clip']).name} asks more than this body can do ({figures(d)}): the root residual carries it"
             for d in take.meta.get("demands", []) if demanding(d)]
    return "; ".join(parts)


def tiring_note(take) -> str:
    """The muscle groups that tire out within the take (a quarter of their strength spent,
    engine.take.effort), e.g. 'tiring (3CC-r): right leg spent after ~5 s', or ''."""
    s = take.meta.get("summary", {})
    ends = s.get("exhausted_after_s_by_group") or {}
    soon = [(t, g) for g, t in ends.items() if t is not None and t < s.get("seconds", 0.0)]
    if not soon:
        return ""
    return "tiring (3CC-r): " + ", ".join(f"{g.replace('_', ' ')} spent after ~{t:.0f} s" for t, g in sorted(soon))


def stand_note(take) -> str:
    """For a held pose the stand controller stood (engine.control.stand), e.g. 'stood the pose
    on its muscles alone (the joints moved 3.5 deg on average to balance it)', or ''."""
    st = take.meta.get("stand")
    if not st:
        return ""
    return f"stood the pose on its muscles alone (the joints moved {st['joints_moved_deg_mean']:.1f} deg on average to balance it)"


def fall_note(take) -> str:
    """Which way the character fell, from when and why (engine.fall), e.g. 'it fell at 3.12 s,
    forward, going down from 2.61 s: tired legs (...)', or '' when it did not."""
    from .fall import describe

    d = (take.meta.get("summary") or {}).get("fall")
    return f"it fell {describe(d)}" if d else ""


def balance_note(take) -> str:
    """For a take the balance planner steered (engine.control.balance), e.g. 'balanced on its
    muscles alone (planned ahead; offsets 1.4 deg on average)', or ''."""
    b = take.meta.get("balance")
    if not b:
        return ""
    return f"balanced on its muscles alone (planned ahead; offsets {b['offset_deg_mean']:.1f} deg on average)"


def pace_note(take) -> str:
    """How far the pace governor slowed the clip (engine.control.pace), e.g. 'slowed to 0.62x
    its pace as the legs tired', or '' when it played at its own pace (or held a still pose)."""
    pc = take.meta.get("pace") or {}
    if take.meta.get("stand") or not pc.get("strength") or pc.get("min_rate", 1.0) > 0.99:
        return ""
    return f"slowed to {pc['final_rate']:.2f}x its pace as the legs tired (lowest {pc['min_rate']:.2f}x)"


def calibration_note(take) -> str:
    """The calibration poses skipped at the start or the end of the take's clips, e.g.
    'skipped a T-pose at the start of walk.bvh (1 frame)', or ''."""
    from .motion.calibration import found_in

    parts = [f"skipped {'an' if cal['pose'] == 'A-pose' else 'a'} {cal['pose']} at the {cal.get('at', 'start')} "
             f"of {Path(c['source']).name} ({cal['frames']} frame{'s' if cal['frames'] > 1 else ''})"
             for c in take.meta.get("clips", []) for cal in found_in(c) if cal.get("skipped")]
    return "; ".join(parts)


def root_path_note(take) -> str:
    """The clips exported in place whose root path was rebuilt from their feet
    (engine.motion.rootpath), e.g. 'walk_in_place.bvh steps in place: its path rebuilt from its
    feet (1.15 m/s)', or ''."""
    parts = [f"{Path(c['source']).name} steps in place: its path rebuilt from its feet ({c['root_path']['feet_mps']:.2f} m/s)"
             for c in take.meta.get("clips", []) if (c.get("root_path") or {}).get("rebuilt")]
    return "; ".join(parts)


def feet_note(take) -> str:
    """The clips whose feet stood on their edges and were levelled (engine.motion.soles), e.g.
    'levelled the feet of cmu_07_01_walk.bvh (they stood 26 deg on their edges)', or ''."""
    parts = [f"levelled the feet of {Path(c['source']).name} (they stood "
             f"{max(abs(d) for d in c['levelled_feet'].values()):.0f} deg on their edges)"
             for c in take.meta.get("clips", []) if c.get("levelled_feet")]
    return "; ".join(parts)


def heading_note(take) -> str:
    """How a heading-mode policy take met its heading goals (engine.control.goals), e.g.
    'heading +90 deg: reached after 3.2 s', or ''."""
    rows = take.meta.get("summary", {}).get("headings") or []
    return "; ".join(f"heading {r['goal']['turn_deg']:+g} deg: "
                     + ("not reached" if r["reached_after_s"] is None else f"reached after {r['reached_after_s']:.1f} s")
                     for r in rows if r["goal"]["time"] > 0 or r["goal"]["turn_deg"])


def push_note(take) -> str:
    """How the character came through each push (engine.push), e.g. 'push at 2 s: back
    after 0.8 s', or ''."""
    from .push import came_back

    rows = take.meta.get("summary", {}).get("pushes") or []
    parts = []
    for r in rows:
        how = "not reached" if not r["reached"] else "fell" if r["fell"] else came_back(r, digits=1)
        parts.append(f"push at {r['time']:g} s: {how}")
    return "; ".join(parts)
