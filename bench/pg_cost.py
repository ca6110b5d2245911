#!/usr/bin/env python3
"""Turns the snapshots of bench/pg_cost.sh into a markdown section: per transfer, the rows each table
got, the entries each index got, the WAL each relation caused, statement times and size growth.

Usage: pg_cost.py OUT_DIR LABEL RATE PAYERS
"""
import collections
import json
import os
import sys

out_dir, label, rate, payers = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])


def tsv(name):
    """Rows of a psql -A -F '\\t' output with its header line, as dicts."""
    with open(os.path.join(out_dir, name)) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    header, rows = lines[0], lines[1:]
    return [dict(zip(header, row)) for row in rows]


def text(name):
    with open(os.path.join(out_dir, name)) as f:
        return f.read().strip()


def journal_counts(name):
    return {r["type"]: int(r["count"]) for r in tsv(name)}


before_j, after_j = journal_counts("before-journal.tsv"), journal_counts("after-journal.tsv")
n = after_j.get("TRANSFER", 0) - before_j.get("TRANSFER", 0)
if n <= 0:
    sys.exit("pg_cost: no transfer was committed during the run")
other = sum(after_j.values()) - sum(before_j.values()) - n

seconds = float(text("after-time.txt")) - float(text("before-time.txt"))
ticks_per_s = os.sysconf("SC_CLK_TCK")
cpu_us = (int(text("after-cpu.txt")) - int(text("before-cpu.txt"))) / ticks_per_s * 1e6

loadgen = {}
try:
    with open(os.path.join(out_dir, "loadgen", "summary.json")) as f:
        loadgen = json.load(f)
except OSError:
    pass


def per(x):
    return x / n


def fmt(x, digits=2):
    return f"{x:,.{digits}f}"


# WAL by relation, from pg_walinspect.
wal = tsv("wal.tsv")
by_rel = collections.defaultdict(lambda: {"records": 0, "bytes": 0, "fpi": 0, "index_entries": 0, "kinds": {}})
total_records = total_bytes = total_fpi = 0
for r in wal:
    rel, rmgr, rtype = r["relation"], r["rmgr"], r["record_type"]
    entries, count = int(r["index_entries"]), int(r["records"])
    size, fpi = int(r["bytes"] or 0), int(r["fpi_bytes"] or 0)
    d = by_rel[rel]
    d["records"] += count
    d["bytes"] += size
    d["fpi"] += fpi
    d["index_entries"] += entries
    d["kinds"][f"{rmgr}/{rtype}"] = d["kinds"].get(f"{rmgr}/{rtype}", 0) + count
    total_records += count
    total_bytes += size
    total_fpi += fpi

def lsn(text_value):
    hi, lo = text_value.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


lsn_bytes = lsn(text("after-lsn.txt")) - lsn(text("before-lsn.txt"))

tables_b = {r["relname"]: r for r in tsv("before-tables.tsv")}
tables_a = {r["relname"]: r for r in tsv("after-tables.tsv")}
indexes_b = {r["indexrelname"]: r for r in tsv("before-indexes.tsv")}
indexes_a = {r["indexrelname"]: r for r in tsv("after-indexes.tsv")}


def delta(a, b, key):
    return int(a[key]) - int(b.get(key, 0) if b else 0)


print(f"### pg_cost: {label}")
print()
print(f"- {n:,} transfers (hot merchant, 16 shards, {payers:,} payers) at {rate:,.0f}/s open loop, "
      f"{seconds:.1f} s between the snapshots; {other} other journal rows in the window.")
if loadgen:
    acc = loadgen.get("accepted", {})
    print(f"- Load generator: achieved {loadgen.get('achieved_rate', 0):,.0f}/s, "
          f"p50 {acc.get('p50_ms', 0):.1f} ms, p99 {acc.get('p99_ms', 0):.1f} ms.")
print(f"- Settings: {'; '.join(text('settings.txt').splitlines())}.")
print(f"- Load average (1/5/15 min) before: {' '.join(text('before-loadavg.txt').split(' ')[0:3])}, "
      f"after: {' '.join(text('after-loadavg.txt').split(' ')[0:3])} (2 CPUs, shared).")
print("- A CHECKPOINT ran just before the run: every page the run touches first writes a full-page "
      "image once, so `WAL with images` is the cost right after a checkpoint, and `WAL without "
      "images` is the steady cost of the records themselves.")
print()
print("| per transfer | value |")
print("| --- | ---: |")
print(f"| WAL bytes (LSN difference) | {fmt(per(lsn_bytes), 0)} |")
print(f"| WAL bytes of records, with images | {fmt(per(total_bytes), 0)} |")
print(f"| WAL bytes of records, without images | {fmt(per(total_bytes - total_fpi), 0)} |")
print(f"| WAL records | {fmt(per(total_records), 2)} |")
outbox_rows = delta(tables_a["outbox_event"], tables_b.get("outbox_event"), "n_tup_ins") if "outbox_event" in tables_a else 0
if outbox_rows > 0:
    print(f"| transfers per writer batch (transfers / outbox rows) | {fmt(n / outbox_rows, 1)} |")
print(f"| heap rows inserted (all tables) | "
      f"{fmt(per(sum(delta(a, tables_b.get(t), 'n_tup_ins') for t, a in tables_a.items())))} |")
print(f"| heap rows updated (all tables) | "
      f"{fmt(per(sum(delta(a, tables_b.get(t), 'n_tup_upd') for t, a in tables_a.items())))} |")
print(f"| index entries (all indexes, from WAL) | "
      f"{fmt(per(sum(d['index_entries'] for d in by_rel.values())))} |")
print(f"| PostgreSQL CPU (all its processes, /proc; noisy on a shared machine) | {fmt(cpu_us / n, 1)} µs |")
print()

print("Tables (per transfer):")
print()
print("| table | inserted | updated | of which HOT | heap bytes grown | WAL bytes (no images) | WAL image bytes |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for t in sorted(tables_a):
    a, b = tables_a[t], tables_b.get(t)
    ins, upd, hot = delta(a, b, "n_tup_ins"), delta(a, b, "n_tup_upd"), delta(a, b, "n_tup_hot_upd")
    grown = delta(a, b, "pg_relation_size")
    w = by_rel.get(t, {"bytes": 0, "fpi": 0})
    if ins == upd == 0 and w["bytes"] == 0:
        continue
    print(f"| {t} | {fmt(per(ins))} | {fmt(per(upd))} | {fmt(per(hot))} | {fmt(per(grown), 0)} | "
          f"{fmt(per(w['bytes'] - w['fpi']), 0)} | {fmt(per(w['fpi']), 0)} |")
print()

print("Indexes (per transfer; entries counted from the B-tree's WAL records, scans from pg_stat_user_indexes):")
print()
print("| index | table | entries | scans | bytes grown | WAL bytes (no images) | WAL image bytes |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
for i in sorted(indexes_a):
    a, b = indexes_a[i], indexes_b.get(i)
    w = by_rel.get(i, {"bytes": 0, "fpi": 0, "index_entries": 0})
    scans = delta(a, b, "idx_scan")
    grown = delta(a, b, "pg_relation_size")
    if w["index_entries"] == 0 and scans == 0 and w["bytes"] == 0:
        continue
    print(f"| {i} | {a['relname']} | {fmt(per(w['index_entries']))} | {fmt(per(scans))} | {fmt(per(grown), 0)} | "
          f"{fmt(per(w['bytes'] - w['fpi']), 0)} | {fmt(per(w['fpi']), 0)} |")
print()

# CPU by process kind: live processes by their pg_stat_activity row (the server's connections by
# application_name), exited ones (autovacuum workers, the setup's connections) together.
try:
    cpu_b = {r["pid"]: int(r["ticks"]) for r in tsv("before-cpu-processes.tsv")}
    cpu_a = {r["pid"]: int(r["ticks"]) for r in tsv("after-cpu-processes.tsv")}
    kinds = {}
    for name in ("before-activity.tsv", "after-activity.tsv"):
        for r in tsv(name):
            app = r["application_name"]
            kinds[r["pid"]] = r["backend_type"] + (f" ({app})" if app and r["backend_type"] == "client backend" else "")
    by_kind = collections.Counter()
    for pid, ticks in cpu_a.items():
        kind = kinds.get(pid, pid if pid in ("exited", "postmaster") else "other")
        by_kind[kind] += ticks - cpu_b.get(pid, 0)
    print("PostgreSQL CPU by process (/proc, µs per transfer; the machine is shared, so these are noisy):")
    print()
    print("| process | µs per transfer |")
    print("| --- | ---: |")
    for kind, ticks in by_kind.most_common():
        if ticks > 0:
            print(f"| {kind} | {fmt(ticks / ticks_per_s * 1e6 / n, 1)} |")
    print()
except (OSError, KeyError):
    pass

named = set(tables_a) | set(indexes_a)
rest = {k: v for k, v in by_rel.items() if k not in named}
if rest:
    print("Other WAL (per transfer): " + "; ".join(
        f"{k} {fmt(per(v['bytes']), 0)} B ({', '.join(f'{kind} {fmt(per(c))}' for kind, c in sorted(v['kinds'].items()))})"
        for k, v in sorted(rest.items(), key=lambda kv: -kv[1]["bytes"])) + ".")
    print()

stmts = tsv("statements.tsv")
if stmts:
    print("Statements (pg_stat_statements with planning tracked, over the run; µs per transfer = "
          "(execution + planning time) / transfers):")
    print()
    print("| statement | calls | mean ms (execution) | mean ms (planning) | µs per transfer (both) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for s in stmts:
        calls, total, plan = int(s["calls"]), float(s["total_exec_time"]), float(s["total_plan_time"])
        if calls == 0:
            continue
        query = s["query"].replace("|", "\\|")
        print(f"| `{query}` | {calls:,} | {total / calls:.3f} | {plan / calls:.3f} | {(total + plan) * 1000 / n:.1f} |")
    print()
