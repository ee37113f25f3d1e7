"""The parts of a take's report (sinew simulate's lines and report.md) on issue 16's
additions: whether it fell, the residual it leaned on and the pace it played at, the gait early against late
(engine.gait), calibration poses (engine.motion.calibration) and pushes (engine.push).
engine/commands/simulate.py puts them in place."""
from __future__ import annotations

from pathlib import Path


def extra_lines(take) -> list[str]:
    """Calibration poses skipped or kept (engine.motion.calibration), how the character
    came through each push (engine.push), and the gait early against late (engine.gait)."""
    from ..motion.calibration import describe as calibration, found_in
    from ..push import describe as push

    out = [f"stand       {stand(take.meta['stand'])}"] if take.meta.get("stand") else []
    out += [f"balance     {balance(take.meta['balance'])}"] if take.meta.get("balance") else []
    out += [f"calibration {Path(c['source']).name}: {calibration(cal)}"
            for c in take.meta["clips"] for cal in found_in(c)]
    out += [f"loop        {Path(n).name}: {note}" for n, note in loop_notes(take)]
    from ..motion.checks import summary_lines as check_lines
    from ..motion.cleanup import describe as repaired

    out += [f"repaired    {Path(c['source']).name}: {repaired(c['repaired'])}" for c in take.meta["clips"]
            if c.get("repaired")]
    from ..motion.rootpath import describe as root_path

    out += [f"root path   {Path(c['source']).name}: {root_path(c.get('root_path'))}" for c in take.meta["clips"]
            if root_path(c.get("root_path"))]
    from ..motion.soles import describe as feet

    out += [f"feet        {Path(c['source']).name}: {feet(c['levelled_feet'])}" for c in take.meta["clips"]
            if c.get("levelled_feet")]
    out += [f"check       {Path(c['source']).name}: {line}" for c in take.meta["clips"]
            for line in check_lines(c.get("checks"))]
    out += [f"push        {push(r)}" for r in take.meta["summary"].get("pushes", [])]
    out += policy_lines(take)
    if take.meta["summary"].get("gait") and not take.meta.get("stand"):  # a held pose has no gait
        from ..gait import describe as gait

        out.append(f"gait        {gait(take.meta['summary']['gait'])}")
    return out


def loop_notes(take) -> list[tuple[str, str]]:
    """(clip, note) for each clip whose ends do not meet and that a take played longer than it
    lasts (engine.control.plan: looped where it loops best, or played once, shorter than asked)."""
    seen, out = set(), []
    for seg in take.meta.get("segments", []):
        note = seg.get("loop_note")
        if note and seg["label"] not in seen:
            seen.add(seg["label"])
            out.append((seg["label"], note))
    return out


def policy_lines(take) -> list[str]:
    """A policy take's mode and noise, and how it met each heading goal (engine.control.goals)."""
    from ..control.goals import describe

    pm = take.meta.get("policy")
    if not pm:
        return []
    what = dict(track="tracks the clips (posterior)", generate="generates from its prior",
                heading="steers with its high-level policy")[pm["mode"]]
    out = [f"policy      {what}, latent noise x{pm['noise_scale']:g}"]
    return out + [f"heading     {describe(r)}" for r in take.meta["summary"].get("headings", [])]


def stand(st: dict) -> str:
    """What the stand controller (engine.control.stand) held a still pose about."""
    left = (f"; the search left {st['balance_left']:.1f} N / N m unbalanced at the root"
            if st["balance_left"] > 1.0 else "")
    return (f"stand controller (an LQR on the muscles alone) about the nearest balanced pose: the root "
            f"{st['root_dz_cm']:+.1f} cm and tilted {st['root_tilt_deg']:.1f} deg, the joints moved "
            f"{st['joints_moved_deg_mean']:.1f} deg on average ({st['joints_moved_deg_max']:.0f} at most); "
            f"holding it takes {st['activation_mean']:.3f} mean activation, {st['activation_max']:.2f} at most{left}")


def balance(b: dict) -> str:
    """How the balance planner (engine.control.balance) steered the tracker."""
    return (f"planned ahead without the residual (predictive sampling, engine/control/balance.py): "
            f"{b['plans']} plans of {b['candidates']} candidates{widened(b)} {b['horizon_s']:g} s ahead{halved(b)}{searched(b)}{rescued(b)}; the last plan kept "
            f"{100 * b['kept_share']:.0f} % of the time{unsearched(b)}, no offsets {100 * b['no_offset_share']:.0f} %; offsets "
            f"{b['offset_deg_mean']:.1f} deg on average ({b['offset_deg_max']:.0f} at most)"
            + (f"; {b['workers_lost']}" if b.get("workers_lost") else ""))


def widened(b: dict) -> str:
    """' (10 more at 120 of them)' where the planner widened its search (BalanceParams.widen,
    eq. 6)."""
    n = b.get("widened")  # takes before 2026-12-07: none
    if not n:
        return ""
    return f" ({b['widen']} more at {n} of them)"


def unsearched(b: dict) -> str:
    """' (unsearched at 250, where it cost under 1x the recent median)' where the planner kept
    its last plan without playing the others (BalanceParams.keep_below, eq. 7)."""
    n = b.get("kept_cheap")  # takes before 2026-12-07: none
    if not n:
        return ""
    return f" (unsearched at {n}, where it cost under {b['keep_below']:g}x the recent median)"


def searched(b: dict) -> str:
    """', 16 more tried at 14 hard decisions (a cheaper plan at 7)' where the planner searched
    more (BalanceParams.extra, eq. 4)."""
    n = b.get("searched_more")  # takes before 2026-12-06: none
    if not n:
        return ""
    return f", {b['extra']} more tried at {n} hard decision{'s' if n > 1 else ''} (a cheaper plan at {b['found_more']})"


def rescued(b: dict) -> str:
    """', 32 wider where every plan fell, at 9 decisions (one that stays up at 4)' where the
    planner searched for a plan that does not fall (BalanceParams.rescue, eq. 9)."""
    n = b.get("rescues")  # takes before 2026-12-07: none
    if not n:
        return ""
    return (f", {b['rescue']} wider where every plan fell, at {n} decision{'s' if n > 1 else ''} "
            f"(one that stays up at {b['rescued']})")


def halved(b: dict) -> str:
    """', halved to 8, 4, 2 of them every 0.2 s' where the planner's rounds dropped plans."""
    h = b.get("halving")  # takes before 2026-12-06: none
    if not h:
        return ""
    return f", halved to {', '.join(map(str, h))} of them every {b['horizon_s'] / (len(h) + 1):g} s"


def pace(take) -> str | None:
    """How the pace governor played the reference (engine.control.pace); None for policy
    takes and takes saved before it existed."""
    pc = take.meta.get("pace")
    if not pc or take.meta.get("stand"):  # a held pose has no pace to play at
        return None
    waited = pc.get("waited_s") or 0.0  # the clip waiting for the body (pace eq. 2)
    wait = f"; the clip waited {waited:.1f} s in all for a body behind it (at its turns and stops)" if waited >= 0.05 else ""
    ran_on = pc.get("ran_on_s") or 0.0  # a clip on its own clock played to its end (takes before 2026-12-07: none)
    wait += f"; the take ran on {ran_on:.1f} s so that its clips played to their ends" if ran_on >= 0.05 else ""
    if not pc["strength"]:
        return "the recorded pace throughout (governor off)" + wait
    return (f"reference at {pc['final_rate']:.2f}x its recorded pace by the end (lowest {pc['min_rate']:.2f}x, "
            f"mean {pc['mean_rate']:.2f}x; the last clip ended {pc['lag_s']:.1f} s behind its own clock; governor strength "
            f"{pc['strength']:g}){wait}")


def glance_lines(take) -> list[str]:
    """report.md's opening: did it fall (when), and did an invisible hand help (how much)."""
    s, m = take.meta["summary"], take.meta
    from ..fall import describe

    fell = (f"**yes, {describe(s['fall'])}**" if s.get("fall") else  # takes before 2026-11-27: no diagnosis
            f"**yes, at {s['stopped_at_s']:.2f} s**" if s["fell"] else
            f"no (the simulation diverged at {s['stopped_at_s']:.2f} s)" if s["diverged"] else "no")
    if m["controller"] != "tracking" or not s["residual_strength"]:
        residual = "none: the muscles and the ground alone"
    else:
        residual = (f"strength {s['residual_strength']:g}: mean {s['residual_mean_N']:.1f} N "
                    f"(**{s['residual_mean_body_weights']:.3f} body weights**) of force nobody sees, "
                    f"{s['residual_torque_mean_Nm']:.1f} N m of torque")
    played = pace(take)
    held = [f"- Stand: {stand(m['stand'])}"] if m.get("stand") else []
    held += [f"- Balance: {balance(m['balance'])}"] if m.get("balance") else []
    held += [f"- {line[:12].strip().capitalize()}: {line[12:]}" for line in policy_lines(take)]
    return ([f"- Fell: {fell}", f"- Root residual: {residual}"] + held + ([f"- Pace: {played}"] if played else [])
            + [""])


def extra_markdown(take) -> list[str]:
    """report.md sections on the gait, calibration poses and pushes (each empty when there
    is nothing to say)."""
    from ..gait import markdown as gait_table
    from ..motion.calibration import describe as calibration, found_in
    from ..push import markdown as push_table

    s = take.meta["summary"]
    cal = [f"- {Path(c['source']).name}: {calibration(rec)}"
           for c in take.meta["clips"] for rec in found_in(c)]
    head = ["", "Calibration poses found at the start or the end of the clips:", ""] if cal else []
    from ..motion.checks import describe as finding

    found = [f"- {Path(c['source']).name}: {finding(f)}" for c in take.meta["clips"] for f in c.get("checks") or []]
    found = ["", "What the clips ask that no body can do (engine/motion/checks.py):", ""] + found if found else []
    loops = [f"- {Path(n).name}: {note}" for n, note in loop_notes(take)]
    loops = ["", "Clips that are not loops, played longer than they last:", ""] + loops if loops else []
    gait = gait_table(s["gait"]) if s.get("gait") and not take.meta.get("stand") else []  # a held pose has none
    return gait + head + cal + found + loops + push_table(s.get("pushes", []))
