#!/usr/bin/env python3
"""Renders scripts/bench/run.sh results (JSON lines) into BENCHMARKS.md.

usage: report.py PEERS.jsonl SCENARIOS.jsonl META.json OUT.md

PEERS.jsonl holds the interleaved rounds of the headline figures (each
figure's median is reported), SCENARIOS.jsonl the scenario table's single
runs (may be empty), META.json what run.sh knew of the run. The peers table
is also printed to stdout, ready to paste. Everything below the line
'<!-- notes -->' in an existing OUT.md is kept, so sections written by hand
survive a re-run.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

MARK = "<!-- notes -->"
PEERS = ("bazel-remote", "nginx")


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


def load(path):
    if not os.path.exists(path):
        return []
    rows = [json.loads(l) for l in open(path) if l.strip()]
    return [r for r in rows if not r["name"].startswith("preload")]


# The peers table's rows: (run name, label, unit: the result field compared).
FIGURES = [
    ("get-4k-c32", "GET 4 KiB, c=32, req/s (p99)", "rps"),
    ("get-16m-c8", "GET 16 MiB, c=8, MB/s", "mb_per_s"),
    ("put-4k-c8-sync", "PUT 4 KiB, c=8, req/s, crash-safe (cachesvc `--sync-writes`)", "rps"),
    ("put-16m-c4", "PUT 16 MiB, c=4, MB/s", "mb_per_s"),
    ("put-16m-c4-sync", "PUT 16 MiB, c=4, MB/s, crash-safe (cachesvc `--sync-writes`)", "mb_per_s"),
]


def cpu_s(r):
    """A run's server CPU seconds per request, or None when not measured."""
    return r["server_cpu_s"] / r["requests"] if r.get("server_cpu_s") is not None and r["requests"] else None


def medians(rows):
    """{(name, target): {field: median over rounds}, plus 'spread' of rps/MB/s}."""
    runs = {}
    for r in rows:
        runs.setdefault((r["name"], r["target"]), []).append(r)
    out = {}
    for k, rs in runs.items():
        m = {f: statistics.median(r[f] for r in rs) for f in ("rps", "mb_per_s", "p50_ms", "p99_ms", "errors")}
        m["rounds"] = len(rs)
        m["errors"] = sum(r["errors"] for r in rs)
        m["up"] = rs[0].get("up_bytes_per_req")
        m["spread"] = {f: (max(r[f] for r in rs) - min(r[f] for r in rs)) / 2 / m[f] if m[f] else 0 for f in ("rps", "mb_per_s")}
        # The server's CPU seconds per request: steadier than throughput
        # where the load generator and the host share the cores.
        cpu = [c for c in map(cpu_s, rs) if c is not None]
        m["cpu"] = statistics.median(cpu) if cpu else None
        out[k] = m
    return out


def cpu_per_req(sec):
    """A CPU time per request, in µs below a millisecond, else in ms."""
    return f"{sec * 1e6:,.0f} µs" if sec < 1e-3 else f"{sec * 1e3:,.1f} ms"


def peers_table(rows, meta):
    med = medians(rows)
    lines = [
        "| figure | cachesvc | bazel-remote | nginx | cachesvc / best peer |",
        "|---|---|---|---|---|",
    ]
    ratios = {}
    for name, label, unit in FIGURES:
        target = "cachesvc-sync" if name.endswith("-sync") else "cachesvc"
        c = med.get((name, target))
        if not c:
            continue

        def cell(m):
            if not m:
                return "—"
            s = f"{m[unit]:,.0f}"
            if m["rounds"] > 1:
                s += f" ±{m['spread'][unit] * 100:.0f}%"
            if name.startswith("get-4k"):
                s += f" (p99 {m['p99_ms']:.2f} ms)"
            if m["cpu"] is not None:
                s += f"; CPU {cpu_per_req(m['cpu'])}"
            if m["errors"]:
                s += f" **{m['errors']} errors**"
            return s

        peers = {p: med.get((name, p)) for p in PEERS}
        measured = {p: m for p, m in peers.items() if m and m[unit] > 0}
        ratios[name] = {p: (c[unit] / m[unit], c, m) for p, m in measured.items()}
        ratio = "—"
        if measured:
            best = max(measured, key=lambda p: measured[p][unit])
            ratio = f"{ratios[name][best][0]:.2f}× {best}"
        br = cell(peers["bazel-remote"]) if "skipped" not in meta["bazel_remote"] else "skipped"
        lines.append(f"| {label} | {cell(c)} | {br} | {cell(peers['nginx'])} | {ratio} |")
    d, f = med.get(("lookup-10m-digest", "cachesvc")), med.get(("lookup-10m-full", "cachesvc"))
    lk = {}
    for key, m, label in (("digest", d, "digest-first"), ("full", f, "full signature")):
        if m:
            lk[key] = m
            vs = "—"
            if key == "digest" and f and m["up"] and m["p50_ms"]:
                vs = f"full signature / digest: {f['up'] / m['up']:,.0f}× bytes, {f['p50_ms'] / m['p50_ms']:.1f}× p50"
            lines.append(
                f"| repeated lookup hit, 10 MiB module, {label}: bytes uploaded, p50 | "
                f"{m['up']:,} B, {m['p50_ms']:.2f} ms | — | — | {vs} |"
            )
    return lines, ratios, lk


def scenario_table(rows):
    by = {}
    for r in rows:
        by.setdefault(r["name"], {})[r["target"]] = r
    lines = [
        "| scenario | c | cachesvc req/s | MB/s | p50 / p99 ms | nginx req/s | MB/s | p50 / p99 ms | "
        "bazel-remote req/s | MB/s | p50 / p99 ms | cachesvc / best peer (req/s) | "
        "server CPU us/req cachesvc / nginx / bazel-remote | errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = {}
    for name, t in by.items():
        c = t.get("cachesvc")
        peers = {p: t.get(p) for p in PEERS if t.get(p) and t[p]["rps"] > 0}
        ratio = "-"
        if c and peers:
            ratios[name] = {p: c["rps"] / m["rps"] for p, m in peers.items()}
            best = max(peers, key=lambda p: peers[p]["rps"])
            ratio = f"{ratios[name][best]:.2f}x {best}"
        any_r = c or next(iter(t.values()))
        errs = sum(x["errors"] for x in t.values())
        cell = lambda x, k, d=1: fmt(x[k], d) if x else "-"
        lat = lambda x: f"{x['p50_ms']:.2f} / {x['p99_ms']:.2f}" if x and x["p50_ms"] else "-"
        cpu = lambda x: fmt(cpu_s(x) * 1e6, 0) if x and cpu_s(x) is not None else "-"
        n, b = t.get("nginx"), t.get("bazel-remote")
        lines.append(
            f"| {name} | {any_r['concurrency']} | {cell(c, 'rps')} | {cell(c, 'mb_per_s')} | {lat(c)} | "
            f"{cell(n, 'rps')} | {cell(n, 'mb_per_s')} | {lat(n)} | "
            f"{cell(b, 'rps')} | {cell(b, 'mb_per_s')} | {lat(b)} | {ratio} | "
            f"{cpu(c)} / {cpu(n)} / {cpu(b)} | {errs} |"
        )
    return lines, ratios, by


def main():
    peers_path, scen_path, meta_path, out_path = sys.argv[1:5]
    meta = json.load(open(meta_path))
    peer_rows, scen_rows = load(peers_path), load(scen_path)
    now = datetime.datetime.now(datetime.timezone.utc)
    ptable, pr, lk = peers_table(peer_rows, meta)
    lines = [
        "# Benchmarks",
        "",
        f"Run {now:%Y-%m-%d %H:%M UTC} on {machine()}; `scripts/bench/run.sh"
        f"{' --quick' if meta['quick'] else ''} -d {meta['duration_s']} -r {meta['rounds']}{' --peers-only' if meta['peers_only'] else ''}`,"
        f" {meta['seconds']} s in all,",
        f"load average {meta['loadavg_before']} before and {meta['loadavg_after']} after.",
        "",
        "## cachesvc and its peers",
        "",
        "Every server on loopback, driven by the same load generator (`scripts/bench/loadgen`) on the",
        f"same cores, in {meta['rounds']} interleaved rounds (each round runs every figure against every",
        "server, their order rotated); each cell is the median over the rounds, ± half the range",
        "between rounds. Ratio: cachesvc over the better of the peers that ran the figure (higher is better).",
        "CPU: the server's CPU time (user + system) per request, median over the rounds (nginx: its",
        "master and workers); where the load generator and the host share the cores it is steadier",
        "than throughput.",
        "- nginx: static files with `sendfile`, WebDAV `PUT`, one worker per core, access log off. It",
        "  does not fsync an upload, so it has no crash-safe figure.",
        f"- bazel-remote: {meta['bazel_remote']}. Its HTTP CAS (`PUT`/`GET /cas/<sha256>`) checks",
        "  each blob's SHA-256 against its key, and fsyncs each blob's file before it answers a `PUT`",
        "  (always: it has no flag for it; it does not fsync the directory).",
        "- cachesvc: `--log-level warn`; the crash-safe rows use a second instance with `--sync-writes`",
        "  (value log and write-ahead log fsynced before the answer). Other rows run without it, as",
        "  cachesvc's default, against bazel-remote's fsync and nginx's none.",
        "- Lookups: a repeated canonical lookup hit of a generated 10 MiB xla module at c=1, sending",
        "  only the signature's SHA-256 (digest-first, the Python client's default) or the whole",
        "  signature; bytes uploaded are one request's request line, headers and body.",
        "",
        *ptable,
        "",
    ]
    sratios, by = {}, {}
    if scen_rows:
        stable, sratios, by = scenario_table(scen_rows)
        lines += [
            "## Scenarios",
            "",
            "Sizes by concurrency, one run each (same servers, not interleaved). Server CPU is the server",
            "processes' CPU time per request during the run (nginx: master and workers); where other",
            "processes load the machine it is steadier than throughput. Rows ending `-first`: each",
            "entry's first read after its upload, at c=1, with every server's files dropped from the page",
            "cache before it (cachesvc writes values of 256 KiB or more past the page cache, the peers",
            "write through it, so otherwise only cachesvc would read from disk); the other rows read warm.",
            "",
            *stable,
            "",
        ]
    lines += ["## Targets", "", "| target | measured | met |", "|---|---|---|"]

    def target(label, value, ok):
        lines.append(f"| {label} | {value} | {'yes' if ok else '**no**'} |")

    # The targets, each against the peer it names.
    def vs(name, peer):
        return pr.get(name, {}).get(peer)

    if r := vs("get-4k-c32", "nginx"):
        target("GET 4 KiB c=32: >= 0.95x nginx req/s", f"{r[0]:.2f}x", r[0] >= 0.95)
        target("GET 4 KiB c=32: p99 <= nginx's", f"{r[1]['p99_ms']:.2f} ms vs {r[2]['p99_ms']:.2f} ms", r[1]["p99_ms"] <= r[2]["p99_ms"])
    if r := vs("get-16m-c8", "nginx"):
        target("GET 16 MiB c=8: >= 1.0x nginx MB/s", f"{r[0]:.2f}x", r[0] >= 1.0)
    if r := vs("put-4k-c8-sync", "bazel-remote"):
        target("PUT 4 KiB c=8, crash-safe: >= 2x bazel-remote req/s", f"{r[0]:.2f}x", r[0] >= 2)
    if r := vs("put-16m-c4", "bazel-remote"):
        target("PUT 16 MiB c=4: >= 1.0x bazel-remote MB/s", f"{r[0]:.2f}x", r[0] >= 1.0)
    if r := vs("put-16m-c4-sync", "bazel-remote"):
        target("PUT 16 MiB c=4, both crash-safe: >= 1.0x bazel-remote MB/s", f"{r[0]:.2f}x", r[0] >= 1.0)
    if "digest" in lk:
        d = lk["digest"]
        target("repeated lookup, 10 MiB module: uploads <= 1 KiB", f"{d['up']:,} B", d["up"] <= 1024)
        target("repeated lookup, 10 MiB module: p50 <= 2 ms", f"{d['p50_ms']:.2f} ms", d["p50_ms"] <= 2)
    for name in [k for k in sratios if k.startswith("get-67108864") and not k.endswith("-first") and "nginx" in sratios[k]]:
        r = sratios[name]["nginx"]
        target(f"GET 64 MiB {name.split('-')[-1]}: >= 0.8x nginx MB/s", f"{r:.2f}x", r >= 0.8)
    for name, t in by.items():
        if name.startswith("lookup-") and "cachesvc" in t:
            r = t["cachesvc"]
            if r["size"] <= 2 << 20:  # the target is for a module of about 1 MiB
                label = f"canonical lookup hit ({name[7:]}, {r['size'] / 2**20:.1f} MiB signature)"
                target(f"{label}: p50 <= 15 ms", f"{r['p50_ms']:.2f} ms", r["p50_ms"] <= 15)
    batch, seq = by.get("batch-64k", {}).get("cachesvc"), by.get("seq-64k", {}).get("cachesvc")
    if batch and seq:
        # Both repeat whole passes over the same entries for the run's
        # duration: the ratio of entries fetched per second.
        sp = batch["rps"] / seq["rps"]
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
    print("\n".join(ptable))


if __name__ == "__main__":
    main()
