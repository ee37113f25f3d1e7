"""A DAgger run's labels without the moment arms, as float32 parts under 15 MiB each (at most
3): what a device call can bring back (run.sh)."""
import sys
from pathlib import Path

import numpy as np


def main(run: Path, out: Path) -> None:
    try:
        with np.load(run / "labels.npz") as f:
            d = {k: f[k] for k in ("state", "target", "label", "episode")}
    except Exception as e:  # noqa: BLE001 - report and go on: the log matters more
        print("labels not packed:", e)
        return
    per = sum(v[:1].nbytes for v in d.values())
    n = len(d["label"])
    step = max(1, (15 << 20) // per)
    for i, a in enumerate(range(0, n, step)):
        if i >= 3:
            print("labels past", a, "left behind")
            break
        np.savez(out / f"labels_{i}.npz", **{k: v[a:a + step] for k, v in d.items()})
    print(n, "labels,", per, "bytes each, parts of", step)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
