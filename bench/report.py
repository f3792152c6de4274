#!/usr/bin/python3
# Turns a bench/compare results file into the README's Markdown table and an SVG bar chart of
# the ratios (gpulab / reference) against the goals of issue 8. No plotting library: plain SVG.
# Usage: bench/report.py RESULTS.json [--svg OUT.svg] [--markdown]
import argparse, json, os

# Goals (gpulab / reference): throughput at least this, memory at most this.
GOALS = [("cpu 1 process", "images_per_second", 1.15), ("cpu 2 ranks", "images_per_second", 1.10),
         ("gemm", "average_gflops", 0.95), ("gpu", "images_per_second", 1.30),
         # Language models (issue 14): tokens/s in one process and with 2 ranks.
         ("cpu 1 process", "tokens_per_second", 1.15), ("cpu 2 ranks", "tokens_per_second", 1.10),
         ("", "peak_host_memory_bytes", 1.0), ("", "peak_device_memory_bytes", 1.0),
         # Pipeline parallelism (issue 41): the measured bubble within 10 % of the formula.
         ("PP 2", "pipeline_bubble_fraction", 1.10), ("PP 2", "pipeline_idle_fraction", 1.10)]


def goal_for(case, metric):
    for prefix, m, g in GOALS:
        if m == metric and case.startswith(prefix):
            return g
    return None


def fmt(metric, x):
    if x is None:
        return "-"
    if metric.startswith("comm_"):  # bytes a step sends: exact, to compare with the formula
        return f"{x:.0f}"
    if "fraction" in metric:  # a pipeline's idle or bubble share, beside its formula
        return f"{x:.4f}"
    return f"{x / 2**20:.0f} MiB" if "bytes" in metric else f"{x:.1f}"


def rows_of(res):
    for row in res["rows"]:
        for m, v in row.items():
            # A metric has a ratio; other figures of a row (a formula beside a count) do not.
            if not isinstance(v, dict) or v.get("gpulab") is None or "ratio" not in v:
                continue
            yield row["case"], m, v


def load(meta, key):
    x = meta.get(key)
    return f"{x:.2f}" if isinstance(x, (int, float)) else "?"


# Extra reference columns a results file may hold: (ratio key, reference key, header). Older
# files ran the channels-last reference with the passive wait; the header says which it was.
EXTRA = [("ratio_vs_channels_last_reference", "reference_channels_last",
          "ratio vs PyTorch `--channels_last`"),
         ("ratio_vs_passive_reference", "reference_passive_wait",
          "ratio vs PyTorch with `OMP_WAIT_POLICY=PASSIVE`"),
         ("ratio_vs_passive_channels_last_reference", "reference_passive_channels_last",
          "ratio vs PyTorch `--channels_last`, `OMP_WAIT_POLICY=PASSIVE`")]


def markdown(res):
    meta = res["meta"]
    extras = [e for e in EXTRA if any(v.get(e[0]) for _, _, v in rows_of(res))]
    out = [f"Taken {meta['date']} on `{meta['host']}`: {meta.get('cpu_model', meta['device'])}, "
           f"{meta['cpu_count']} cores, torch {meta.get('torch', '?')}, torchvision "
           f"{meta.get('torchvision', '?')}, transformers {meta.get('transformers', '?')}; {meta['reps']} paired "
           f"repetitions, {meta['warmup']} warm-up + {meta['steps']} timed steps; load average "
           f"{load(meta, 'loadavg_start')} at the start, {load(meta, 'loadavg_end')} at the end.", "",
           "| case | metric | gpulab | PyTorch | ratio | goal | met |"
           + "".join(f" {e[2]} |" for e in extras),
           "|---|---|---:|---:|---:|---:|:-:|" + "---:|" * len(extras)]
    for case, m, v in rows_of(res):
        g = goal_for(case, m)
        r = v["ratio"]
        met = "-" if (g is None or r is None) else (
            "yes" if (r >= g if v["higher_is_better"] else r <= g) else "no")
        gs = "-" if g is None else (f"≥ {g:.2f}" if v["higher_is_better"] else f"≤ {g:.2f}")
        extra = []
        for ratio_key, ref_key, _ in extras:
            rr = v.get(ratio_key)
            extra.append("-" if rr is None else f"{rr:.3f} ({fmt(m, v[ref_key])})")
        out.append(f"| {case} | {m} | {fmt(m, v['gpulab'])} | {fmt(m, v['reference'])} | "
                   f"{'-' if r is None else f'{r:.3f}'} | {gs} | {met} |"
                   + "".join(f" {x} |" for x in extra))
    return "\n".join(out)


def svg(res):
    bars = [(f"{c} · {m.replace('_', ' ')}", v["ratio"], goal_for(c, m), v["higher_is_better"])
            for c, m, v in rows_of(res) if v["ratio"]]
    w, left, bh, gap, top = 900, 380, 22, 8, 40
    h = top + len(bars) * (bh + gap) + 40
    xmax = max([2.0] + [b[1] * 1.1 for b in bars])
    sx = lambda r: left + (w - left - 30) * r / xmax
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
         f'<rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="10" y="22" font-size="14" font-weight="bold">gpulab ÷ PyTorch reference '
         f'({res["meta"]["date"]}, {res["meta"]["host"]}, {res["meta"]["device"]})</text>']
    for i, (label, r, g, hib) in enumerate(bars):
        y = top + i * (bh + gap)
        ok = g is None or (r >= g if hib else r <= g)
        s.append(f'<text x="{left - 8}" y="{y + bh - 6}" text-anchor="end">{label}</text>')
        s.append(f'<rect x="{left}" y="{y}" width="{sx(r) - left:.1f}" height="{bh}" '
                 f'fill="{"#3a7d44" if ok else "#c0392b"}"/>')
        s.append(f'<text x="{sx(r) + 4:.1f}" y="{y + bh - 6}">{r:.2f}{"" if hib else " (lower is better)"}</text>')
        if g is not None:
            s.append(f'<line x1="{sx(g):.1f}" x2="{sx(g):.1f}" y1="{y - 2}" y2="{y + bh + 2}" '
                     f'stroke="black" stroke-width="2" stroke-dasharray="3,2"/>')
    y1 = top + len(bars) * (bh + gap)
    s.append(f'<line x1="{sx(1):.1f}" x2="{sx(1):.1f}" y1="{top - 4}" y2="{y1}" stroke="#888"/>')
    s.append(f'<text x="{sx(1):.1f}" y="{y1 + 14}" text-anchor="middle">1.0 = parity; dashed: goal</text>')
    s.append("</svg>")
    return "\n".join(s)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--svg", default="")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(res))
        print(f"chart: {a.svg}")
    if a.markdown:
        print(markdown(res))
