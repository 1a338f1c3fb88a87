#!/usr/bin/env python3
"""Figures for `fedcaf dp-profile` output: peak memory and iteration time by
mode and sequence length, memory against time, and the overheads of each DP
mode against no DP. Usage: plot_dp_profile.py DIR (the -o DIR of
fedcaf dp-profile); writes DIR/figures/*.png.

Every figure has a title naming the model (the first line of summary.txt)
and units on every axis; memory is in MiB throughout (peak_memory_mb counts
2^20 bytes), time in ms; sequence lengths are in numeric order."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import LogLocator, ScalarFormatter  # noqa: E402

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
summary = out / "summary.txt"
model = ""
if summary.exists():
    first = summary.read_text().splitlines()[:1]
    if first:
        model = first[0].removeprefix("fedcaf dp-profile: ")


def titled(fig, title):
    fig.suptitle(title, fontsize=12)
    if model:
        fig.text(0.5, 0.915, model, ha="center", fontsize=8, color="dimgray")
    fig.tight_layout(rect=(0, 0, 1, 0.91))


def bars(ax, key, ylabel):
    width = 0.8 / max(1, len(modes))
    for i, m in enumerate(modes):
        xs = [j + (i - (len(modes) - 1) / 2) * width
              for j, t in enumerate(lengths) if (m, t) in by]
        ys = [by[(m, t)][key] for t in lengths if (m, t) in by]
        ax.bar(xs, ys, width, label=m, color=colors[m])
    ax.set_xticks(range(len(lengths)), [str(t) for t in lengths])
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel(ylabel)
    ax.legend(title="DP mode", fontsize=8)


fig, ax = plt.subplots(figsize=(8, 5))
bars(ax, "peak_memory_mb", "peak tensor memory (MiB)")
titled(fig, "Peak memory by DP mode and sequence length")
fig.savefig(figures / "memory_comparison.png", dpi=110)
plt.close(fig)

fig, ax = plt.subplots(figsize=(8, 5))
bars(ax, "avg_time_ms", "mean iteration time (ms)")
titled(fig, "Iteration time by DP mode and sequence length")
fig.savefig(figures / "time_comparison.png", dpi=110)
plt.close(fig)


def place_labels(ax, points, fontsize=7):
    """Labels each (x, y, text) point beside it, trying places around it
    until the label's box is clear of the boxes placed before."""
    per_point = ax.figure.dpi / 72
    placed = []

    def clear(box):
        return all(box[2] <= o[0] or o[2] <= box[0] or box[3] <= o[1] or
                   o[3] <= box[1] for o in placed)

    for x, y, text in points:
        w = 0.62 * fontsize * len(text)  # points
        h = fontsize * 1.2
        px, py = ax.transData.transform((x, y))
        tries = [(4, 4), (4, -h - 2), (-w - 4, 4), (-w - 4, -h - 2),
                 (4, h + 6), (4, -2 * h - 8), (-w - 4, h + 6),
                 (-w - 4, -2 * h - 8)]
        for dx, dy in tries:
            box = (px + dx * per_point, py + dy * per_point,
                   px + (dx + w) * per_point, py + (dy + h) * per_point)
            if clear(box):
                break
        placed.append(box)
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                    fontsize=fontsize)


fig, ax = plt.subplots(figsize=(8, 5.5))
points = []
for m in modes:
    pts = [by[(m, t)] for t in lengths if (m, t) in by]
    ax.plot([p["avg_time_ms"] for p in pts], [p["peak_memory_mb"] for p in pts],
            marker="o", label=m, color=colors[m])
    points += [(p["avg_time_ms"], p["peak_memory_mb"], f'T={p["seq_length"]}')
               for p in pts]
ax.set_xscale("log")
ax.set_yscale("log")
for axis in (ax.xaxis, ax.yaxis):
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(plt.NullFormatter())
ax.set_xlabel("mean iteration time (ms, log scale)")
ax.set_ylabel("peak tensor memory (MiB, log scale)")
ax.legend(title="DP mode", fontsize=8)
titled(fig, "Memory against time (T: sequence length)")
place_labels(ax, points)
fig.savefig(figures / "memory_vs_time_tradeoff.png", dpi=110)
plt.close(fig)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
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
for ax, label, title in (
        (left, "extra peak tensor memory (MiB)", "Memory overhead"),
        (right, "extra iteration time (%)", "Time overhead")):
    ax.set_xticks(range(len(lengths)), [str(t) for t in lengths])
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel(label)
    ax.set_title(title, fontsize=10)
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(title="DP mode", fontsize=8)
titled(fig, "Overheads of each DP mode against no DP, same sequence length")
fig.savefig(figures / "overhead_analysis.png", dpi=110)
plt.close(fig)
print(f"figures in {figures}")
