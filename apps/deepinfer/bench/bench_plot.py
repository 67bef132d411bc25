# Pareto charts of `deepinfer bench serve` result files, in the style of DeepInfer's published charts.
# Run by `deepinfer bench plot` (embedded in the binary): python3 -c SCRIPT OUT_DIR RESULT.json...
# One series per "label" (default: the model), one point per result file (a concurrency or a rate),
# joined in order of concurrency / rate; the Pareto frontier of each series is drawn bold.
#   decode_pareto.png   x: per-user output speed (1000 / mean TPOT, tok/s)  y: output throughput (tok/s)
#   prefill_pareto.png  x: median TTFT (s)                                 y: input throughput (tok/s)
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(paths):
    series = {}
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        conc = r.get("max_concurrency")
        rate = r.get("request_rate")
        key = conc if conc is not None else (float("inf") if rate in (None, "inf") else float(rate))
        tag = f"c={conc}" if conc is not None else f"rate={rate}"
        series.setdefault(r.get("label") or r.get("model_id") or "run", []).append((key, tag, r))
    for points in series.values():
        points.sort(key=lambda p: p[0])
    return series


def frontier(xy, x_better_high):
    # Points not dominated: no other point is better on x and on y (y: higher is better).
    out = []
    for x, y in xy:
        dominated = any(
            (ox >= x if x_better_high else ox <= x) and oy >= y and (ox, oy) != (x, y) for ox, oy in xy
        )
        if not dominated:
            out.append((x, y))
    return sorted(out)


def chart(series, out_path, title, xlabel, ylabel, xy_of, x_better_high):
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=100)
    for name, points in series.items():
        xs, ys, tags = [], [], []
        for _, tag, r in points:
            x, y = xy_of(r)
            if x is None:
                continue
            xs.append(x)
            ys.append(y)
            tags.append(tag)
        if not xs:
            continue
        line, = ax.plot(xs, ys, "o--", alpha=0.6, label=name)
        fx = frontier(list(zip(xs, ys)), x_better_high)
        ax.plot([p[0] for p in fx], [p[1] for p in fx], "-", color=line.get_color(), linewidth=2.5)
        for x, y, tag in zip(xs, ys, tags):
            ax.annotate(tag, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    print(out_path)


def decode_xy(r):
    tpot = r.get("mean_tpot_ms") or 0
    return (1000.0 / tpot if tpot > 0 else None), r.get("output_throughput", 0)


def prefill_xy(r):
    return r.get("median_ttft_ms", 0) / 1000.0, r.get("input_throughput", 0)


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    series = load(paths)
    chart(series, os.path.join(out_dir, "decode_pareto.png"), "Decode: throughput vs per-user speed",
          "per-user output speed (tok/s/user)", "output throughput (tok/s)", decode_xy, True)
    chart(series, os.path.join(out_dir, "prefill_pareto.png"), "Prefill: throughput vs time to first token",
          "median TTFT (s)", "input throughput (tok/s)", prefill_xy, False)


main()
