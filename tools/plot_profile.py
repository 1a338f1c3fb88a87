#!/usr/bin/env python3
"""Figures for `fedcaf profile` output: memory over time per role for each
run (with round ends marked), peak memory per configuration, and time per
round. Usage: plot_profile.py DIR (the -o DIR of fedcaf profile)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out = pathlib.Path(sys.argv[1])
figures = out / "figures"
figures.mkdir(exist_ok=True)
runs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
runs = [r for r in runs if "summary" in r]
gib = float(1 << 30)

for run in runs:
    s = run["summary"]
    fig, ax = plt.subplots(figsize=(8, 4))
    for role in run["roles"]:
        t = role["timeline"]["t_s"]
        ax.plot(t, [x / gib for x in role["timeline"]["rss_bytes"]],
                label=f'{role["role"]} RSS')
        ax.plot(t, [x / gib for x in role["timeline"]["file_bytes"]],
                linestyle=":", label=f'{role["role"]} file-backed')
    for end in next((r["round_ends_s"] for r in run["roles"]
                     if r["role"] == "server"), []):
        ax.axvline(end, color="grey", linewidth=0.8)
    ax.axhline(s["model_bytes"] / gib, color="black", linestyle="--",
               linewidth=0.8, label="model size S")
    ax.set_xlabel("seconds (grey lines: round ends)")
    ax.set_ylabel("GiB")
    ax.set_title(s["name"])
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(figures / f'memory_{s["name"]}.png', dpi=100)
    plt.close(fig)

if runs:
    names = [r["summary"]["name"] for r in runs]
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(max(6, len(names)), 4))
    ax.bar([i - 0.2 for i in x], [r["summary"]["server_peak_ratio"] for r in runs],
           width=0.4, label="server")
    ax.bar([i + 0.2 for i in x], [r["summary"]["client_peak_ratio"] for r in runs],
           width=0.4, label="client (largest)")
    ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("peak RSS / model size")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figures / "peak_memory.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, len(names)), 4))
    ax.bar(list(x), [r["summary"]["seconds_per_round"] for r in runs])
    ax.set_xticks(list(x), names, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("seconds per round")
    fig.tight_layout()
    fig.savefig(figures / "round_time.png", dpi=100)
    plt.close(fig)
print(f"figures in {figures}")
