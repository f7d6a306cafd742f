#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Chart of a bench run: speed-up over kernel TCP loopback, per workload.

  bench/plot.py bench/results/latest.json bench/results/latest.png

Reads the JSON that bench/run.sh and bench/interposed.py write (the core
figures, "programs" and "floor", issue 12's rows, "apps", issue 25's) and draws horizontal bars,
log-scaled: shortcut and the Unix-domain socket, each as a speed-up over
kernel TCP (throughput / TCP's; for rows where lower is better, latency,
wall time, CPU per request, TCP's figure / its figure, so that higher is
better everywhere), with the lowest–highest repetition as a whisker, a line
at 1x and each row's target, where issue 5 or 12 sets one, as a marker.
"""
import json
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def speedup(ratio, lower):
    """a ratio x/TCP as a speed-up: higher is better"""
    if ratio is None or ratio <= 0:
        return None
    return 1 / ratio if lower else ratio


def spread(sp, lower):
    if not sp:
        return None
    a, b = speedup(sp[0], lower), speedup(sp[1], lower)
    return (min(a, b), max(a, b))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        data = json.load(f)
    rows = list(data.get("core", []))
    progs = data.get("programs", {})
    rows += progs.get("rows", [])
    rows += data.get("floor", {}).get("rows", [])
    rows += data.get("apps", [])                # bench/apps.py, issue 25
    items = []
    for r in rows:
        lower = r.get("lower_is_better", False)
        s = speedup(r.get("ratio_to_tcp"), lower)
        u = speedup(r.get("unix_ratio_to_tcp"), lower)
        if s is None and u is None:
            continue
        t = r.get("target")
        tv = None
        if t:
            tv = speedup(t["ratio_to_tcp"], lower)
        label = r["title"].replace("`", "")
        if lower:
            label += " [TCP's / this]"
        items.append({
            "label": "\n".join(textwrap.wrap(label, 58)),
            "shortcut": s, "unix": u,
            "shortcut_spread": spread(r.get("ratio_to_tcp_spread"), lower),
            "unix_spread": spread(r.get("unix_ratio_to_tcp_spread"), lower),
            "target": tv, "target_met": r.get("target_met"),
            "core": r["id"].startswith("core_"),
        })
    n = len(items)
    fig, ax = plt.subplots(figsize=(14, 0.62 * n + 2.2))
    h = 0.38
    ys = list(range(n))[::-1]          # first row at the top
    vals = [1.0]
    labelled = set()

    def once(name):
        if name in labelled:
            return None
        labelled.add(name)
        return name
    for y, it in zip(ys, items):
        for key, off, color, name in (("shortcut", h / 2, "#1f77b4", "shortcut"),
                                      ("unix", -h / 2, "#ff7f0e", "Unix socket")):
            v = it[key]
            if v is None:
                continue
            vals.append(v)
            sp = it[key + "_spread"]
            xerr = None
            if sp:
                xerr = [[max(v - sp[0], 0)], [max(sp[1] - v, 0)]]
                vals += list(sp)
            ax.barh(y + off, v, height=h, color=color, xerr=xerr,
                    error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#444"},
                    label=once(name))
            right = max(v, sp[1] if sp else v,
                        it["target"] if key == "shortcut" and it["target"] else v)
            ax.text(right * 1.12, y + off, f"{v:.3g}x", va="center", fontsize=7)
        if it["target"]:
            vals.append(it["target"])
            ok = it["target_met"]
            ax.plot([it["target"]], [y + h / 2], marker="D", markersize=7,
                    color="#2ca02c" if ok else "#d62728", zorder=5,
                    label=once("target (green: met, red: missed)"))
    ax.set_xscale("log")
    lo, hi = min(vals), max(vals)
    ax.set_xlim(min(0.5, lo / 1.6), hi * 3)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.text(1.0, -0.75, " kernel TCP = 1x", fontsize=8, va="bottom")
    ax.set_yticks(ys)
    ax.set_yticklabels([it["label"] for it in items], fontsize=7.5)
    for tick, it in zip(ax.get_yticklabels(), items):
        if it["core"]:
            tick.set_color("#555")
    ax.set_ylim(-0.8, n - 0.2)
    ax.set_xlabel("speed-up over kernel TCP loopback (log scale; higher is better — "
                  "for lower-is-better rows: TCP's figure / this transport's)")
    quick = " (--quick)" if progs.get("quick") else ""
    ax.set_title(f"shortcut bench{quick}, {data.get('date', '').replace('T', ' ')}, {data.get('cpus', '?')} CPUs: "
                 f"medians; whiskers: lowest–highest repetition", fontsize=10)
    ax.grid(axis="x", which="both", alpha=0.25)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}", file=sys.stderr)


if __name__ == "__main__":
    main()
