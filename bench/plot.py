"""The comparison as a picture: throughput and end-to-end latency per system (PNG).

    python -m bench.plot [bench/compare.json] [bench/compare.png]
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

THROUGHPUT_CELLS = [
    ("produce", 100, 6, "produce\n100 B, 6p"),
    ("consume", 100, 6, "consume\n100 B, 6p"),
    ("produce", 1024, 6, "produce\n1 KB, 6p"),
    ("consume", 1024, 6, "consume\n1 KB, 6p"),
    ("together-produce", 100, 6, "together: prod.\n100 B, 6p"),
    ("together-consume", 100, 6, "together: cons.\n100 B, 6p"),
]


def plot(data: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.rows import aggregate, rate_label

    agg = aggregate(data["rows"])
    systems = [s for s in data["systems_order"] if any(r["system"] == s for r in data["rows"])]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.5),
                                   gridspec_kw={"width_ratios": [3, 2]})
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color = {system: palette[i % len(palette)] for i, system in enumerate(systems)}
    width = 0.8 / max(len(systems), 1)
    for i, system in enumerate(systems):
        meds, lows, highs = [], [], []
        for workload, size, partitions, _ in THROUGHPUT_CELLS:
            part = 1 if system.endswith("-benchmark") else partitions
            g = agg.get((system, workload, size, part), {}).get("records_per_sec")
            meds.append(g["median"] if g else 0)
            lows.append(g["median"] - g["min"] if g else 0)
            highs.append(g["max"] - g["median"] if g else 0)
        xs = [x + i * width for x in range(len(THROUGHPUT_CELLS))]
        ax1.bar(xs, meds, width, yerr=[lows, highs], label=system, capsize=2, color=color[system])
    ax1.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(THROUGHPUT_CELLS))])
    ax1.set_xticklabels([c[3] for c in THROUGHPUT_CELLS], fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("records/s (median, min-max)")
    ax1.set_title("Throughput")
    ax1.legend(fontsize=8)
    ax1.grid(axis="y", which="both", alpha=0.3)

    lat_systems = [s for s in systems if not s.endswith("-benchmark")]
    rates = data["args"]["rates"]
    partitions = data["args"]["e2e_partitions"]
    width = 0.8 / max(len(lat_systems), 1)
    for i, system in enumerate(lat_systems):
        p99s, p50s = [], []
        for rate in rates:
            g = agg.get((system, f"e2e@{rate_label(rate)}", 100, partitions), {})
            p50s.append(g["p50_ms"]["median"] if "p50_ms" in g else 0)
            p99s.append(g["p99_ms"]["median"] if "p99_ms" in g else 0)
        xs = [x + i * width for x in range(len(rates))]
        ax2.bar(xs, p99s, width, label=f"{system} p99", alpha=0.4, color=color[system])
        ax2.bar(xs, p50s, width, color=color[system], label=f"{system} p50")
    ax2.set_xticks([x + width * (len(lat_systems) - 1) / 2 for x in range(len(rates))])
    ax2.set_xticklabels([f"{rate_label(r)} rec/s" for r in rates])
    ax2.set_yscale("log")
    ax2.set_ylabel("end-to-end latency, ms (p50 solid, p99 light)")
    ax2.set_title("End-to-end latency, 100 B")
    ax2.legend(fontsize=7, ncol=2)
    ax2.grid(axis="y", which="both", alpha=0.3)
    note = data.get("note") or ""
    title = f"odradek vs peers, {data['runs']} run(s), {data['date']}"
    if note:
        title += "\n" + textwrap.shorten(note, 160)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    src = Path(args[0]) if args else HERE / "compare.json"
    out = Path(args[1]) if len(args) > 1 else HERE / "compare.png"
    plot(json.loads(src.read_text()), out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
