#!/usr/bin/env python3
"""Renders scripts/bench/run.sh results (JSON lines) into BENCHMARKS.md.

usage: report.py RESULTS.jsonl OUT.md CACHESVC_BINARY

Everything below the line '<!-- notes -->' in an existing OUT.md is kept, so
profiling findings written by hand survive a re-run.
"""
import datetime
import json
import os
import platform
import subprocess
import sys

MARK = "<!-- notes -->"


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def machine():
    mem = "?"
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    gov = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} cores ({cpu}), {mem} memory, {gov}, {platform.system()} {platform.release()}"


def main():
    results_path, out_path = sys.argv[1], sys.argv[2]
    rows = [json.loads(l) for l in open(results_path) if l.strip()]
    rows = [r for r in rows if not r["name"].startswith("preload")]
    by = {}
    for r in rows:
        by.setdefault(r["name"], {})[r["target"]] = r
    lines = [
        "# Benchmarks",
        "",
        f"Run {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} on {machine()}.",
        "Produced by `scripts/bench/run.sh`: cachesvc and a baseline nginx (static files, `sendfile`,",
        "WebDAV `PUT`, one worker per core, access log off) on loopback, driven by the same load",
        "generator (`scripts/bench/loadgen`) in the same run. Ratio = cachesvc / nginx (higher is",
        "better for req/s and MB/s). The machine is small and shared; compare ratios, not absolutes.",
        "Server CPU is the server processes' CPU time per request during the run (cachesvc; nginx",
        "master and workers); the load generator runs on the same cores. Where other processes load",
        "the machine, the CPU ratio (nginx / cachesvc, higher is better for cachesvc) is the steadier",
        "comparison.",
        "",
        "| scenario | c | cachesvc req/s | cachesvc MB/s | cachesvc p50 / p99 ms | nginx req/s | nginx MB/s | nginx p50 / p99 ms | ratio (req/s) | server CPU us/req cachesvc / nginx | CPU ratio | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = {}
    for name, t in by.items():
        c, n = t.get("cachesvc"), t.get("nginx")
        ratio = None
        if c and n and n["rps"] > 0:
            ratio = c["rps"] / n["rps"]
            ratios[name] = ratio
        any_r = c or n
        errs = sum(x["errors"] for x in (c, n) if x)
        cell = lambda x, k, d=1: fmt(x[k], d) if x else "-"
        lat = lambda x: f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f}" if x and x["p50_ms"] else "-"
        cpu = lambda x: x["server_cpu_s"] * 1e6 / x["requests"] if x and x.get("server_cpu_s") and x["requests"] else None
        cc, nc = cpu(c), cpu(n)
        cpu_ratio = f"{nc / cc:.2f}x" if cc and nc else "-"
        lines.append(
            f"| {name} | {any_r['concurrency']} | {cell(c, 'rps')} | {cell(c, 'mb_per_s')} | {lat(c)} | "
            f"{cell(n, 'rps')} | {cell(n, 'mb_per_s')} | {lat(n)} | {fmt(ratio, 2) + 'x' if ratio else '-'} | "
            f"{fmt(cc, 0)} / {fmt(nc, 0)} | {cpu_ratio} | {errs} |"
        )
    batch, seq = by.get("batch-64k", {}).get("cachesvc"), by.get("seq-64k", {}).get("cachesvc")
    lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]

    def target(label, value, ok):
        lines.append(f"| {label} | {value} | {'yes' if ok else '**no**'} |")

    for name in ("get-4096-c16", "get-4096-c64"):
        if name in ratios:
            target(f"GET 4 KiB {name[-3:]}: >= 0.8x nginx req/s", f"{ratios[name]:.2f}x", ratios[name] >= 0.8)
    c64 = by.get("get-4096-c64", {}).get("cachesvc")
    if c64:
        target("GET 4 KiB c=64: p99 <= 5 ms", f"{c64['p99_ms']:.2f} ms", c64["p99_ms"] <= 5)
    for name in [k for k in ratios if k.startswith("get-67108864")]:
        target(f"GET 64 MiB {name.split('-')[-1]}: >= 0.8x nginx MB/s", f"{ratios[name]:.2f}x", ratios[name] >= 0.8)
    for name in [k for k in ratios if k.startswith("put-")]:
        size = name.split("-")[1]
        if size in ("4096", "67108864"):
            target(f"PUT {size} B: >= 0.8x nginx", f"{ratios[name]:.2f}x", ratios[name] >= 0.8)
    for name, t in by.items():
        if name.startswith("lookup-") and "cachesvc" in t:
            r = t["cachesvc"]
            label = f"canonical lookup hit ({name[7:]}, {r['size'] / 2**20:.1f} MiB signature)"
            if r["size"] <= 2 << 20:  # the target is for a module of about 1 MiB
                target(f"{label}: p50 <= 15 ms", f"{r['p50_ms']:.2f} ms", r["p50_ms"] <= 15)
            else:
                lines.append(f"| {label} (no target; for reference) | {r['p50_ms']:.2f} ms p50 | - |")
    if batch and seq:
        sp = seq["seconds"] / batch["seconds"]
        target("1 batch of 1,000 x 64 KiB vs 1,000 sequential GETs: >= 5x", f"{sp:.1f}x", sp >= 5)
    notes = ""
    if os.path.exists(out_path):
        old = open(out_path).read()
        if MARK in old:
            notes = old[old.index(MARK):]
    if not notes:
        notes = MARK + "\n\n## Profiling notes\n\n(none yet)\n"
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n\n" + notes)


if __name__ == "__main__":
    main()
