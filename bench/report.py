#!/usr/bin/env python3
"""Writes bench/RESULTS.md from the raw outputs of bench/run.sh (baseline.tsv, loadgen summaries).

Usage: report.py OUT_DIR RESULTS_MD
"""
import csv
import datetime
import json
import os
import platform
import subprocess
import sys

out_dir, results_path = sys.argv[1], sys.argv[2]


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = 0.0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gb = int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    try:
        pg = subprocess.run(["pgbench", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pg = "pgbench not found"
    return f"{os.cpu_count()} CPUs ({model}), {mem_gb:.0f} GB RAM, {platform.system()} {platform.release()}, {pg}"


def load_baseline():
    path = os.path.join(out_dir, "baseline.tsv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def load_summary(name):
    path = os.path.join(out_dir, name, "summary.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def best_baseline(rows, workload):
    """The best throughput of a baseline workload over its client counts."""
    candidates = [r for r in rows if r["workload"] == workload and r["tps"]]
    if not candidates:
        return None
    return max(candidates, key=lambda r: float(r["tps"]))


baseline = load_baseline()
lines = []
lines.append("# Benchmark results: classic row-lock transfer vs. the wallet server")
lines.append("")
lines.append(f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M %Z').strip()}")
lines.append(f"- Machine: {machine()}")
lines.append("- PostgreSQL and Redis: private instances from `scripts/services.sh` under `var/bench`, "
             "fsync on, same PostgreSQL for both designs.")
lines.append("- Reproduce: `bench/run.sh` (or `bench/run.sh --baseline-only`).")
load_start_path = os.path.join(out_dir, "load-start.txt")
load_start = open(load_start_path).read().split()[:3] if os.path.exists(load_start_path) else None
load_end = open("/proc/loadavg").read().split()[:3]
lines.append(f"- Load average (1/5/15 min) at the start: {' '.join(load_start) if load_start else 'not recorded'}; "
             f"at the end: {' '.join(load_end)}.")
# Only the load before the run tells of other work: the spikes at the end overload the machine on
# purpose, which leaves the load average at the end near 3 on a quiet machine.
if load_start and float(load_start[0]) > 2.5:
    lines.append("- **Other work ran on this 2-core machine when the benchmark started** (load average above 2.5): "
                 "both designs lost CPU to it, and the figures are lower and noisier than on a quiet machine.")
lines.append("")

lines.append("## Baseline: one database transaction per transfer, both rows locked (pgbench)")
lines.append("")
if baseline:
    lines.append("pgbench `-M prepared -j 2`, closed loop, the statements of `shared/BASELINE.md` sent one by "
                 "one from the client (`bench/baseline/`); 100,000 funded accounts. Latency from pgbench's "
                 "per-transaction log. `invariants` checks after each run that the balances still sum to "
                 "zero, every cached balance equals its entries and no ordinary account is negative; "
                 "`committed` counts the transfers in the ledger afterwards.")
    lines.append("")
    lines.append("| workload | clients | transfers/s | p50 ms | p99 ms | max ms | failed | committed | invariants |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in baseline:
        lines.append(f"| {r['workload']} | {r['clients']} | {float(r['tps']):.0f} | {r['p50_ms']} | "
                     f"{r['p99_ms']} | {r['max_ms']} | {r['failed']} | {r.get('committed', '')} | {r['invariants']} |")
else:
    lines.append("Not run.")
lines.append("")

pairs = [
    ("hot merchant", "hot_merchant", "hot-merchant"),
    ("hot merchant vs. baseline with 16 sub-accounts", "hot_merchant_16", "hot-merchant"),
    ("payday", "payday", "payday"),
    ("P2P / uniform", "uniform", "p2p"),
]
lines.append("## Side by side: highest throughput with p99 <= 100 ms")
lines.append("")
lines.append("The server's figure is the highest open-loop rate (latency counted from each request's "
             "scheduled send time) whose p99 of accepted transfers stayed within 100 ms and whose achieved "
             "rate kept up with the intended one. The baseline's is its best closed-loop throughput over "
             "the client counts, whatever its p99 (which favours the baseline).")
lines.append("")
lines.append("| workload | baseline transfers/s (clients, p50/p99 ms) | server transfers/s (p50/p99 ms) | ratio | server verification |")
lines.append("| --- | --- | --- | ---: | --- |")
any_server = False
for label, base_name, server_name in pairs:
    b = best_baseline(baseline, base_name)
    s = load_summary(f"server-{server_name}")
    b_text = f"{float(b['tps']):.0f} ({b['clients']}, {b['p50_ms']}/{b['p99_ms']})" if b else "not run"
    if s and s.get("search") and "best_achieved" not in s["search"]:
        any_server = True
        s_text, ratio = "no step within target", "-"
        verdict = "PASS" if s.get("verify", {}).get("pass") else "FAIL"
    elif s and s.get("search"):
        any_server = True
        sr = s["search"]
        s_text = f"{sr.get('best_achieved', 0):.0f} ({sr.get('best_p50_ms', 0):.1f}/{sr.get('best_p99_ms', 0):.1f})"
        ratio = f"{sr.get('best_achieved', 0) / float(b['tps']):.1f}x" if b and float(b["tps"]) > 0 else "-"
        verdict = "PASS" if s.get("verify", {}).get("pass") else "FAIL"
    else:
        s_text, ratio, verdict = "not run", "-", "-"
    lines.append(f"| {label} | {b_text} | {s_text} | {ratio} | {verdict} |")
lines.append("")

def load_cpu(workload):
    """The CPU per transfer by process of bench/run.sh's fixed-rate run: (rate, {name: us})."""
    path = os.path.join(out_dir, f"cpu-{workload}.txt")
    if not os.path.exists(path):
        return None
    rate, per = 0, {}
    with open(path) as f:
        for line in f:
            name, value = line.split()
            if name == "rate":
                rate = int(value)
            else:
                per[name] = float(value)
    return rate, per


cpu_rows = [(label, load_cpu(name), load_summary(f"cpu-run-{name}"))
            for label, name in (("hot merchant", "hot-merchant"), ("payday", "payday"))]
if any(c for _, c, _ in cpu_rows):
    processes = ["wallet-server", "postgres", "wallet-loadgen", "redis-server"]
    lines.append("## CPU per transfer by process")
    lines.append("")
    lines.append("After each workload's search, on the same server and accounts: an open-loop run at a fixed rate (6,000/s, or "
                 "three quarters of the capacity found if that is less), with every process's CPU time (user + "
                 "system, from /proc) read over 10 s of it and divided by the transfers sent. \"other\" is every "
                 "other process on the machine (kernel threads included). The same figures for other rates and "
                 "settings: `bench/cpu_per_request.sh --workload W --rate R [NAME=VALUE...]`.")
    lines.append("")
    lines.append("| workload | rate /s | achieved /s | non-201 | " + " | ".join(processes) + " | other | total (µs) |")
    lines.append("| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in processes) + " | ---: | ---: |")
    for label, cpu, run in cpu_rows:
        if not cpu:
            lines.append(f"| {label} | not run | | | " + " | ".join("" for _ in processes) + " | | |")
            continue
        rate, per = cpu
        achieved = f"{run.get('achieved_rate', 0):.0f}" if run else "-"
        statuses = (run or {}).get("statuses", {})
        non_201 = sum(v.get("count", 0) for k, v in statuses.items() if k != "201") if statuses else "-"
        other = sum(v for k, v in per.items() if k not in processes)
        cells = [f"{per.get(p, 0):.0f}" for p in processes]
        lines.append(f"| {label} | {rate} | {achieved} | {non_201} | " + " | ".join(cells) +
                     f" | {other:.0f} | {sum(per.values()):.0f} |")
    lines.append("")

lines.append("## Spikes against capacity (server)")
lines.append("")
lines.append("C is the measured capacity: the best hot-merchant rate within p99 100 ms above. Each run holds "
             "a base of 0.1 C for 15 s, ramps up over 2 s, holds the peak for 10 s, ramps down over 2 s, and "
             "runs to 60 s, with the default per-user rate limit and retries after `Retry-After`. Shares are of "
             "requests whose first answer was 429, 503, or none at all (timeouts, refused connections, the "
             "client's own queue). Two p99s of the requests scheduled during the spike that ended accepted: "
             "of the accepted answer itself, from when that attempt was due (its schedule, or the end of the "
             "`Retry-After` wait that followed a 503) to its 201, the client's own queue included; and until "
             "accepted, from the first schedule, which adds the retried requests' waits (a request first "
             "answered 503 waits at least the 1 s of its `Retry-After`, so this p99 is above 1 s whenever more "
             "than 1% are retried). Targets of the 1.5 C overload (2 s client deadline): the accepted answers' "
             "p99 at most 300 ms, back at the baseline latency within 10 s, and no request without an answer.")
lines.append("")
lines.append("| run | C /s | base /s | peak /s | share 429 | share 503 | no answer | p99 of accepted answers (ms) "
             "| p99 until accepted (ms) | p99 before (ms) | s until back at baseline | targets | verification |")
lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
any_spike = False
for multiplier in (10, 15):
    spike = load_summary(f"server-spike-x{multiplier}")
    if not spike or not spike.get("spike"):
        continue
    any_spike = True
    sp = spike["spike"]
    try:
        with open(os.path.join(out_dir, f"server-spike-x{multiplier}", "capacity.txt")) as f:
            capacity = float(f.read().strip() or 0)
    except (OSError, ValueError):
        capacity = 0.0
    base = spike.get("baseline_rate", 0)
    rec = sp.get("recovery_s")
    rec_text = f"{rec:.0f}" if rec is not None and rec >= 0 else "not recovered"
    if multiplier == 15:
        met = (sp.get("p99_accepted_answer_ms", 1e9) <= 300 and rec is not None and 0 <= rec <= 10
               and sp.get("share_errors", 0) == 0)
        targets = "met" if met else "NOT met"
    else:
        targets = "-"
    lag = spike.get("send_lag", {}).get("p99_ms", 0)
    lag_note = f" (load generator {lag:.0f} ms late at p99)" if lag > 10 else ""
    lines.append(f"| x{multiplier}{lag_note} | {capacity:.0f} | {base:.0f} | {base * multiplier:.0f} | "
                 f"{100 * sp.get('share_429', 0):.1f}% | {100 * sp.get('share_503', 0):.1f}% | "
                 f"{100 * sp.get('share_errors', 0):.1f}% | {sp.get('p99_accepted_answer_ms', float('nan')):.1f} | "
                 f"{sp.get('p99_accepted_ms', 0):.1f} | "
                 f"{sp.get('baseline_p99_ms', 0):.1f} | {rec_text} | {targets} | "
                 f"{'PASS' if spike.get('verify', {}).get('pass') else 'FAIL'} |")
if not any_spike:
    lines.append("| not run | | | | | | | | | | | | |")
lines.append("")

if any_server:
    lines.append("## Server search steps")
    lines.append("")
    for label, _, server_name in pairs[:1] + pairs[2:]:
        s = load_summary(f"server-{server_name}")
        if not s or not s.get("search"):
            continue
        lines.append(f"{label}:")
        lines.append("")
        lines.append("| intended/s | achieved/s | p50 ms | p99 ms | non-201 | within target |")
        lines.append("| ---: | ---: | ---: | ---: | ---: | --- |")
        for st in s["search"].get("steps", []):
            lines.append(f"| {st['rate']:.0f} | {st['achieved']:.0f} | {st['p50_ms']:.1f} | {st['p99_ms']:.1f} | "
                         f"{st['not_accepted']} | {'yes' if st['ok'] else 'no'} |")
        lines.append("")

# Payday through the batch endpoint is measured by its own script (bench/payday_batch.sh); its
# latest report is carried over here, so that a new run of this one does not lose it.
batch_report = os.path.join(os.path.dirname(results_path), "PAYDAY_BATCH.md")
if os.path.exists(batch_report):
    with open(batch_report) as f:
        body = f.read().splitlines()
    lines.append("## " + body[0].lstrip("# ") + " (bench/payday_batch.sh, bench/PAYDAY_BATCH.md)")
    lines.extend(body[1:])
    lines.append("")

with open(results_path, "w") as f:
    f.write("\n".join(lines).rstrip() + "\n")
