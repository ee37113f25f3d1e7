"""Which source bone drives which model body: bone-name presets, a guess, and map files.

A mapping is a dict {model body name: source bone name}. Several bodies may share one source
bone (both toe bodies of the model follow a single toe bone). Bodies left out keep their rest
local rotation. The model's bodies (rigs/human284):

    Pelvis, FemurR/L, TibiaR/L, TalusR/L, FootThumbR/L, FootPinkyR/L, Spine, Torso, Neck, Head,
    ShoulderR/L (clavicle), ArmR/L, ForeArmR/L, HandR/L

`resolve_mapping` is the one entry point: an explicit map (dict or JSON file) wins, then a
named preset, then the best-scoring preset (a structural guess from names and topology
giving the bodies its names miss, where the two agree), then the guess alone.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import InputFileError, ParameterError
from .skeleton import SourceSkeleton

SIDES = ("R", "L")
# Bodies the retarget cannot do without ("Spine or Torso" is checked separately).
REQUIRED = [f"{b}{s}" for b in ("Femur", "Tibia", "Talus", "Arm", "ForeArm") for s in SIDES]
REQUIRED = ["Pelvis"] + REQUIRED
SPINE_ANY = ("Spine", "Torso")
OPTIONAL = ["Spine", "Torso", "Neck", "Head"] + [
    f"{b}{s}" for b in ("Shoulder", "Hand", "FootThumb", "FootPinky") for s in SIDES
]
MODEL_BODIES = REQUIRED + OPTIONAL


def _sided(table: dict[str, list[str]]) -> dict[str, list[str]]:
    """Expand '{S}'/'{side}'/'{s}' templates for both sides: R/Right/r and L/Left/l."""
    words = {"R": ("R", "Right", "r", "right"), "L": ("L", "Left", "l", "left")}
    out: dict[str, list[str]] = {}
    for body, names in table.items():
        if "{" not in body:
            out[body] = list(names)
            continue
        for s in SIDES:
            S, Side, lo, side = words[s]
            out[body.format(S=S)] = [
                n.format(S=S, Side=Side, s=lo, side=side) for n in names
            ]
    return out


# Candidate source bone names per body, best first. Matching is exact first, then ignoring
# case and any "namespace:" prefix (so "mixamorig1:Hips" and "Hips" match "mixamorig:Hips").
PRESETS: dict[str, dict[str, list[str]]] = {
    "mass": _sided({
        "Pelvis": ["Character1_Hips"],
        "Femur{S}": ["Character1_{Side}UpLeg"],
        "Tibia{S}": ["Character1_{Side}Leg"],
        "Talus{S}": ["Character1_{Side}Foot"],
        "FootThumb{S}": ["Character1_{Side}ToeBase"],
        "FootPinky{S}": ["Character1_{Side}ToeBase"],
        "Spine": ["Character1_Spine"],
        "Torso": ["Character1_Spine1"],
        "Neck": ["Character1_Neck"],
        "Head": ["Character1_Head"],
        "Shoulder{S}": ["Character1_{Side}Shoulder"],
        "Arm{S}": ["Character1_{Side}Arm"],
        "ForeArm{S}": ["Character1_{Side}ForeArm"],
        "Hand{S}": ["Character1_{Side}Hand"],
    }),
    "mixamo": _sided({
        "Pelvis": ["mixamorig:Hips"],
        "Femur{S}": ["mixamorig:{Side}UpLeg"],
        "Tibia{S}": ["mixamorig:{Side}Leg"],
        "Talus{S}": ["mixamorig:{Side}Foot"],
        "FootThumb{S}": ["mixamorig:{Side}ToeBase"],
        "FootPinky{S}": ["mixamorig:{Side}ToeBase"],
        "Spine": ["mixamorig:Spine"],
        # The chest: the bone the neck and clavicles hang from.
        "Torso": ["mixamorig:Spine2", "mixamorig:Spine1"],
        "Neck": ["mixamorig:Neck"],
        "Head": ["mixamorig:Head"],
        "Shoulder{S}": ["mixamorig:{Side}Shoulder"],
        "Arm{S}": ["mixamorig:{Side}Arm"],
        "ForeArm{S}": ["mixamorig:{Side}ForeArm"],
        "Hand{S}": ["mixamorig:{Side}Hand"],
    }),
    "rigify": _sided({
        "Pelvis": ["DEF-spine"],
        "Femur{S}": ["DEF-thigh.{S}"],
        "Tibia{S}": ["DEF-shin.{S}"],
        "Talus{S}": ["DEF-foot.{S}"],
        "FootThumb{S}": ["DEF-toe.{S}"],
        "FootPinky{S}": ["DEF-toe.{S}"],
        "Spine": ["DEF-spine.001"],
        "Torso": ["DEF-spine.003", "DEF-spine.002"],
        "Neck": ["DEF-spine.004"],
        "Head": ["DEF-spine.006", "DEF-spine.005"],
        "Shoulder{S}": ["DEF-shoulder.{S}"],
        "Arm{S}": ["DEF-upper_arm.{S}"],
        "ForeArm{S}": ["DEF-forearm.{S}"],
        "Hand{S}": ["DEF-hand.{S}"],
    }),
    "unreal": _sided({
        "Pelvis": ["pelvis"],
        "Femur{S}": ["thigh_{s}"],
        "Tibia{S}": ["calf_{s}"],
        "Talus{S}": ["foot_{s}"],
        "FootThumb{S}": ["ball_{s}"],
        "FootPinky{S}": ["ball_{s}"],
        "Spine": ["spine_01"],
        # UE5 mannequins have spine_01..05, UE4 spine_01..03: the top one carries the clavicles.
        "Torso": ["spine_05", "spine_04", "spine_03", "spine_02"],
        "Neck": ["neck_01"],
        "Head": ["head"],
        "Shoulder{S}": ["clavicle_{s}"],
        "Arm{S}": ["upperarm_{s}"],
        "ForeArm{S}": ["lowerarm_{s}"],
        "Hand{S}": ["hand_{s}"],
    }),
    "cmu": _sided({
        "Pelvis": ["Hips"],
        "Femur{S}": ["{Side}UpLeg"],
        "Tibia{S}": ["{Side}Leg"],
        "Talus{S}": ["{Side}Foot"],
        "FootThumb{S}": ["{Side}ToeBase"],
        "FootPinky{S}": ["{Side}ToeBase"],
        "Spine": ["LowerBack", "Spine"],
        "Torso": ["Spine1", "Spine"],
        "Neck": ["Neck"],
        "Head": ["Head"],
        "Shoulder{S}": ["{Side}Shoulder"],
        "Arm{S}": ["{Side}Arm"],
        "ForeArm{S}": ["{Side}ForeArm"],
        "Hand{S}": ["{Side}Hand"],
    }),
    "smpl": _sided({
        "Pelvis": ["pelvis", "Pelvis"],
        "Femur{S}": ["{side}_hip", "{S}_Hip"],
        "Tibia{S}": ["{side}_knee", "{S}_Knee"],
        "Talus{S}": ["{side}_ankle", "{S}_Ankle"],
        "FootThumb{S}": ["{side}_foot", "{S}_Foot"],
        "FootPinky{S}": ["{side}_foot", "{S}_Foot"],
        "Spine": ["spine1", "Spine1"],
        "Torso": ["spine3", "Spine3", "spine2", "Spine2"],
        "Neck": ["neck", "Neck"],
        "Head": ["head", "Head"],
        "Shoulder{S}": ["{side}_collar", "{S}_Collar"],
        "Arm{S}": ["{side}_shoulder", "{S}_Shoulder"],
        "ForeArm{S}": ["{side}_elbow", "{S}_Elbow"],
        "Hand{S}": ["{side}_wrist", "{S}_Wrist"],
    }),
}
PRESET_NAMES = tuple(PRESETS)


def _normal(name: str) -> str:
    """Name without any 'namespace:' prefix, lower case."""
    return name.rsplit(":", 1)[-1].lower()


def missing_required(mapping: dict[str, str]) -> list[str]:
    """Model bodies the mapping needs but lacks ('Spine or Torso' counts as one)."""
    miss = [b for b in REQUIRED if b not in mapping]
    if not any(b in mapping for b in SPINE_ANY):
        miss.append("Spine or Torso")
    return miss


def match_preset(skeleton: SourceSkeleton, preset: str) -> dict[str, str]:
    """The mapping a preset gives on this skeleton (bodies whose candidates are all absent
    are left out)."""
    if preset not in PRESETS:
        raise ParameterError("preset", f"unknown preset {preset!r}; choose one of {', '.join(PRESET_NAMES)}")
    exact = set(skeleton.names)
    loose: dict[str, str] = {}
    for n in skeleton.names:
        loose.setdefault(_normal(n), n)
    out = {}
    for body, cands in PRESETS[preset].items():
        for c in cands:
            if c in exact:
                out[body] = c
                break
        else:
            for c in cands:
                if _normal(c) in loose:
                    out[body] = loose[_normal(c)]
                    break
    return out


def _score(mapping: dict[str, str]) -> int:
    req = sum(b in mapping for b in REQUIRED) + any(b in mapping for b in SPINE_ANY)
    return 100 * req + sum(b in mapping for b in OPTIONAL)


# ---- structural guess -----------------------------------------------------------------
_SPLIT = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_EXCLUDE = ("twist", "roll", "rigmesh", "end", "nub", "ik", "pole", "target", "mch", "org")


def _tokens(name: str) -> list[str]:
    name = name.rsplit(":", 1)[-1]
    return [t.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for t in _SPLIT.findall(part)]


def _side(tokens: list[str]) -> str | None:
    if "left" in tokens or "l" in tokens:
        return "L"
    if "right" in tokens or "r" in tokens:
        return "R"
    return None


def _stem(tokens: list[str]) -> str:
    return "".join(t for t in tokens if t not in ("left", "right", "l", "r", "def", "mixamorig"))


def is_twist_bone(name: str) -> bool:
    """A twist or roll helper by its name (Daz's lThighTwist, Unreal's upperarm_twist_01_l)."""
    return any("twist" in t or "roll" in t for t in _tokens(name))


def guess_mapping(skeleton: SourceSkeleton) -> dict[str, str]:
    """A mapping from bone names and the hierarchy, for skeletons no preset fits.

    Per side: the hand (hand/wrist) and the foot (foot/ankle) are found by name, the forearm,
    upper arm, clavicle, shin and thigh as their named ancestors (twist/roll helpers skipped);
    the pelvis is the common ancestor of the thighs, the chest that of the upper arms, the
    spine the pelvis's child towards the chest.
    """
    names, parents = skeleton.names, skeleton.parents
    toks = [_tokens(n) for n in names]
    side = [_side(t) for t in toks]
    stem = [_stem(t) for t in toks]
    helper = [any(x in t for x in _EXCLUDE) for t in toks]
    depth = [0] * len(names)
    for j in range(1, len(names)):
        depth[j] = depth[parents[j]] + 1

    def ancestors(j):
        out = []
        while parents[j] >= 0:
            j = int(parents[j])
            out.append(j)
        return out

    def find(s, include, exclude=(), among=None):
        cand = [j for j in (range(len(names)) if among is None else among)
                if not helper[j] and (s is None or side[j] == s)
                and any(k in stem[j] for k in include) and not any(k in stem[j] for k in exclude)]
        return min(cand, key=lambda j: depth[j]) if cand else None

    def nearest_up(j, include, exclude=()):
        if j is None:
            return None
        for a in ancestors(j):
            if not helper[a] and any(k in stem[a] for k in include) and not any(k in stem[a] for k in exclude):
                return a
        return None

    def descendants(j):
        return [k for k in range(len(names)) if j in ancestors(k)]

    m: dict[str, int] = {}
    for s in SIDES:
        foot = find(s, ("foot", "ankle"), ("toe", "ball", "end"))
        if foot is not None:
            m["Talus" + s] = foot
            shin = nearest_up(foot, ("shin", "calf", "knee", "leg", "tibia"), ("up",))
            if shin is not None:
                m["Tibia" + s] = shin
                thigh = nearest_up(shin, ("thigh", "upleg", "upperleg", "femur", "hip", "leg"))
                if thigh is not None:
                    m["Femur" + s] = thigh
            toe = find(None, ("toe", "ball", "foot"), ("end",), among=descendants(foot))
            if toe is not None:
                m["FootThumb" + s] = m["FootPinky" + s] = toe
        hand = find(s, ("hand", "wrist"))
        if hand is not None:
            m["Hand" + s] = hand
            fore = nearest_up(hand, ("forearm", "lowerarm", "elbow", "arm"), ("up",))
            if fore is not None:
                m["ForeArm" + s] = fore
                arm = nearest_up(fore, ("upperarm", "arm", "shoulder", "shldr", "humerus"), ("fore", "lower"))
                if arm is not None:
                    m["Arm" + s] = arm
                    clav = nearest_up(arm, ("clavicle", "collar", "shoulder"))
                    if clav is not None:
                        m["Shoulder" + s] = clav

    def lca(a, b):
        if a is None or b is None:
            return None
        up = [a] + ancestors(a)
        for x in [b] + ancestors(b):
            if x in up:
                return x
        return None

    pelvis = lca(m.get("FemurR"), m.get("FemurL"))
    if pelvis is not None:
        m["Pelvis"] = pelvis
    chest = lca(m.get("ShoulderR", m.get("ArmR")), m.get("ShoulderL", m.get("ArmL")))
    # the spine rises from the pelvis, or (Daz, Poser: a "hip" above a "pelvis" that carries
    # the thighs) from the bone both hang from
    base = pelvis if pelvis is None or chest is None or pelvis in ancestors(chest) else lca(pelvis, chest)
    if chest is not None and base is not None and base in ancestors(chest):
        m["Torso"] = chest
        path = [chest] + ancestors(chest)
        below = path[: path.index(base)]
        if len(below) >= 2:
            m["Spine"] = below[-1]
    neck = find(None, ("neck",))
    if neck is None:  # Character Creator's neck is "NeckTwist01": a helper's name, the only neck
        helper_neck = [j for j in range(len(names)) if "neck" in stem[j] and not any(x in stem[j] for x in ("end", "nub"))]
        neck = min(helper_neck, key=lambda j: depth[j]) if helper_neck else None
    if neck is not None:
        m["Neck"] = neck
    head = find(None, ("head",), ("top", "end"))
    if head is not None:
        m["Head"] = head
    return {b: names[j] for b, j in m.items()}


# ---- map files ------------------------------------------------------------------------
def load_map(path) -> dict[str, str]:
    """A JSON map file {"model body": "source bone", ...}; InputFileError naming it if bad."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputFileError(path, f"cannot read map file: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise InputFileError(path, f"not valid JSON: {e.msg}", e.lineno) from None
    if isinstance(data, dict) and isinstance(data.get("mapping"), dict):
        data = data["mapping"]
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise InputFileError(path, 'expected a JSON object {"model body": "source bone", ...}')
    return dict(data)


def check_mapping(mapping: dict[str, str], skeleton: SourceSkeleton, origin: str) -> None:
    """ParameterError for unknown model bodies or source bones absent from the skeleton."""
    bad_b = [b for b in mapping if b not in MODEL_BODIES]
    if bad_b:
        raise ParameterError(
            "map", f"{origin}: unknown model bodies {bad_b}; the model's bodies are {', '.join(MODEL_BODIES)}")
    names = set(skeleton.names)
    bad_s = {b: s for b, s in mapping.items() if s not in names}
    if bad_s:
        raise ParameterError("map", f"{origin}: source bones not in the skeleton: {bad_s}")


def resolve_mapping(skeleton: SourceSkeleton, preset: str | None = None,
                    mapping: dict[str, str] | str | Path | None = None) -> tuple[dict[str, str], str]:
    """The mapping to use and where it came from ('map', a preset name, 'guess', or a preset
    name + ' + guess' where the guess gave bodies the preset's names missed).

    An explicit mapping (dict, or the path of a JSON map file) is laid over the preset (or
    the automatic choice): its entries win, an entry mapped to "" or null removes a body.
    Fails, listing the missing model bodies and the preset tried, when a required body is
    unmapped.
    """
    override: dict[str, str] | None = None
    origin = "map"
    if mapping is not None:
        if isinstance(mapping, (str, Path)):
            origin = f"map {Path(mapping).name}"
            override = load_map(mapping)
        else:
            override = dict(mapping)
        for b in override:
            if b not in MODEL_BODIES:
                raise ParameterError(
                    "map", f"{origin}: unknown model body {b!r}; the model's bodies are {', '.join(MODEL_BODIES)}")
    if preset is not None:
        base, label = match_preset(skeleton, preset), preset
    else:
        scored = [(_score(match_preset(skeleton, p)), -i, p) for i, p in enumerate(PRESET_NAMES)]
        best = max(scored)
        label = best[2]
        base = match_preset(skeleton, label)
        g = guess_mapping(skeleton)
        if missing_required(base):
            if _score(g) > best[0]:
                base, label = g, "guess"
        elif all(g.get(b) == base[b] for b in REQUIRED + list(SPINE_ANY) if b in base):
            # a preset's names, but not all of them (LAFAN1's "LeftToe" for Mixamo's
            # "LeftToeBase"): where the guess agrees on every body the preset found, it
            # gives the ones the preset missed
            extra = {b: s for b, s in g.items() if b not in base}
            if extra:
                base, label = {**base, **extra}, f"{label} + guess"
    out = dict(base)
    if override is not None:
        for b, s in override.items():
            if s:
                out[b] = s
            else:
                out.pop(b, None)
        label = f"{label} + {origin}"
    check_mapping(out, skeleton, label)
    miss = missing_required(out)
    if miss:
        tried = (f"preset {preset!r}" if preset is not None else
                 f"automatic choice: every preset (the nearest, {best[2]!r}, names "
                 f"{_score(match_preset(skeleton, best[2])) // 100} of the {len(REQUIRED) + 1} bodies needed) and a "
                 "guess from the bones' names and hierarchy")
        raise ParameterError(
            "mapping",
            f"the source skeleton lacks bones for model bodies {', '.join(miss)} "
            f"(tried {tried}; give --preset {'|'.join(PRESET_NAMES)} or a --map JSON file "
            '{"model body": "source bone"})')
    return out, label
