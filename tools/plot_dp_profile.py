#!/usr/bin/env python3
"""Figures for `fedcaf dp-profile` output: peak memory and iteration time by
mode and sequence length, memory against time, and the overheads of each DP
mode against no DP. Usage: plot_dp_profile.py DIR (the -o DIR of
fedcaf dp-profile); writes DIR/figures/*.png."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = pathlib.Path(sys.argv[1])
figures = out / "figures"
figures.mkdir(exist_ok=True)
runs = [json.loads(p.read_text()) for p in sorted(out.glob("*_result.json"))]
runs = [r for r in runs if r.get("ok")]
order = ["none", "per_sample", "ghost", "fused"]
modes = [m for m in order if any(r["mode"] == m for r in runs)]
lengths = sorted({r["seq_length"] for r in runs})
by = {(r["mode"], r["seq_length"]): r for r in runs}
colors = {"none": "tab:gray", "per_sample": "tab:red", "ghost": "tab:blue",
          "fused": "tab:green"}


def bars(ax, key, ylabel, title):
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        xs = [j + (i - (len(modes) - 1) / 2) * width
              for j, t in enumerate(lengths) if (m, t) in by]
        ys = [by[(m, t)][key] for t in lengths if (m, t) in by]
        ax.bar(xs, ys, width, label=m, color=colors[m])
    ax.set_xticks(range(len(lengths)), [str(t) for t in lengths])
    ax.set_xlabel("sequence length")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


fig, ax = plt.subplots(figsize=(8, 4.5))
bars(ax, "peak_memory_mb", "peak tensor memory (MB)",
     "Peak memory by mode and sequence length")
fig.tight_layout()
fig.savefig(figures / "memory_comparison.png", dpi=110)

fig, ax = plt.subplots(figsize=(8, 4.5))
bars(ax, "avg_time_ms", "mean iteration time (ms)",
     "Iteration time by mode and sequence length")
fig.tight_layout()
fig.savefig(figures / "time_comparison.png", dpi=110)

fig, ax = plt.subplots(figsize=(7, 5))
for m in modes:
    pts = [by[(m, t)] for t in lengths if (m, t) in by]
    ax.plot([p["avg_time_ms"] for p in pts], [p["peak_memory_mb"] for p in pts],
            marker="o", label=m, color=colors[m])
    for p in pts:
        ax.annotate(str(p["seq_length"]), (p["avg_time_ms"], p["peak_memory_mb"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=8)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("mean iteration time (ms)")
ax.set_ylabel("peak tensor memory (MB)")
ax.set_title("Memory against time (labels: sequence length)")
ax.legend()
fig.tight_layout()
fig.savefig(figures / "memory_vs_time_tradeoff.png", dpi=110)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
dp_modes = [m for m in modes if m != "none"]
width = 0.8 / max(1, len(dp_modes))
for i, m in enumerate(dp_modes):
    ts = [t for t in lengths if (m, t) in by and ("none", t) in by]
    xs = [lengths.index(t) + (i - (len(dp_modes) - 1) / 2) * width for t in ts]
    mem = [by[(m, t)]["peak_memory_mb"] - by[("none", t)]["peak_memory_mb"]
           for t in ts]
    pct = [100 * (by[(m, t)]["avg_time_ms"] / by[("none", t)]["avg_time_ms"] - 1)
           for t in ts]
    left.bar(xs, mem, width, label=m, color=colors[m])
    right.bar(xs, pct, width, label=m, color=colors[m])
for ax, label in ((left, "memory overhead (MB)"), (right, "time overhead (%)")):
    ax.set_xticks(range(len(lengths)), [str(t) for t in lengths])
    ax.set_xlabel("sequence length")
    ax.set_ylabel(label)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend()
left.set_title("Memory overhead against no DP")
right.set_title("Time overhead against no DP")
fig.tight_layout()
fig.savefig(figures / "overhead_analysis.png", dpi=110)
print(f"figures in {figures}")
