#!/usr/bin/env python3
"""Figures for `fedcaf profile` output: memory over time per role for each
run (with round ends marked), peak memory per configuration, and time per
round. Usage: plot_profile.py DIR (the -o DIR of fedcaf profile).

Every figure has a title and units on its axes; runs are ordered by memory
mode, then model size (numerically), clients and chunking; all memory axes
of one profile use one unit (MiB, or GiB when the largest model reaches
1 GiB)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = pathlib.Path(sys.argv[1])
figures = out / "figures"
figures.mkdir(exist_ok=True)
runs = [json.loads(p.read_text()) for p in out.glob("*.json")]
runs = [r for r in runs if "summary" in r]
mode_order = {"ram": 0, "window": 1, "disk": 2}


def order(run):
    s = run["summary"]
    return (mode_order.get(s["memory_mode"], 9), s["model_bytes"],
            s["clients"], not s["chunking"])


runs.sort(key=order)
largest = max((r["summary"]["model_bytes"] for r in runs), default=0)
unit, scale = ("GiB", float(1 << 30)) if largest >= 1 << 30 else \
    ("MiB", float(1 << 20))


def size_text(nbytes):
    mib = nbytes / (1 << 20)
    return f"{mib / 1024:g} GiB" if mib >= 1024 else f"{mib:g} MiB"


def label(s):
    """One run, read as words: '64 MiB, 2 clients, chunked, ram'."""
    return (f'{size_text(s["model_bytes"])}, {s["clients"]} clients, '
            f'{"chunked" if s["chunking"] else "whole model"}, '
            f'{s["memory_mode"]} mode')


for run in runs:
    s = run["summary"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for role in run["roles"]:
        t = role["timeline"]["t_s"]
        line, = ax.plot(t, [x / scale for x in role["timeline"]["rss_bytes"]],
                        label=f'{role["role"]}: resident (RSS)')
        ax.plot(t, [x / scale for x in role["timeline"]["file_bytes"]],
                linestyle=":", color=line.get_color(),
                label=f'{role["role"]}: file-backed part')
    ends = next((r["round_ends_s"] for r in run["roles"]
                 if r["role"] == "server"), [])
    for i, end in enumerate(ends):
        ax.axvline(end, color="grey", linewidth=0.8,
                   label="round ends" if i == 0 else None)
    ax.axhline(s["model_bytes"] / scale, color="black", linestyle="--",
               linewidth=0.8, label="model size")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel(f"memory ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Memory over time: {label(s)}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(figures / f'memory_{s["name"]}.png', dpi=100)
    plt.close(fig)


def horizontal_bars(ax, names, series, xlabel, title):
    """Bars side by side per run, one row per run (labels never overlap)."""
    height = 0.8 / len(series)
    ys = list(range(len(names)))
    for i, (name, values) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * height
        bars = ax.barh([y + offset for y in ys], values, height, label=name)
        ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    ax.set_yticks(ys, names, fontsize=8)
    ax.invert_yaxis()  # the first run on top
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.margins(x=0.15)
    if len(series) > 1:
        ax.legend(fontsize=8, loc="lower right")


if runs:
    names = [label(r["summary"]) for r in runs]
    height = max(3.0, 0.45 * len(runs) * 2 + 1.5)
    fig, ax = plt.subplots(figsize=(9, height))
    horizontal_bars(
        ax, names,
        [("server", [r["summary"]["server_peak_ratio"] for r in runs]),
         ("client (largest)", [r["summary"]["client_peak_ratio"]
                               for r in runs])],
        "peak RSS / model size (x)",
        "Peak memory per process, as a multiple of the model size")
    ax.axvline(1.0, color="black", linestyle="--", linewidth=0.8)
    fig.tight_layout()
    fig.savefig(figures / "peak_memory.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.45 * len(runs) + 1.5)))
    horizontal_bars(
        ax, names,
        [("seconds per round",
          [r["summary"]["seconds_per_round"] for r in runs])],
        "time per round (s)", "Round time (download, train, upload)")
    fig.tight_layout()
    fig.savefig(figures / "round_time.png", dpi=100)
    plt.close(fig)
print(f"figures in {figures}")
