#!/usr/bin/env python3
"""Webhook delivery throughput and latency against a running wallet-server (docs/events.md, Webhooks).

Starts a receiver on 127.0.0.1 (answers 204 at once), registers ENDPOINTS endpoints of one merchant
on it (the server needs webhooks.allow_loopback = true), makes TRANSFERS payments to the merchant
from THREADS client threads, and waits until the receiver has every event on every endpoint. Prints
the deliveries a second (from the first payment's answer to the last delivery) and the delivery
latency (the event's createdAt to its arrival) per endpoint.

With --other-owners N, N other merchants register an endpoint each first: they get none of these
events, but the fan-out serves them every step. The server's reads of the feed during the run
(wallet_webhook_feed_reads_total, where it has the series) are printed too.

  bench/webhooks.py --url http://127.0.0.1:8080 --operator-key KEY [--transfers 1000] [--endpoints 1]
                    [--other-owners 0]
"""
import argparse
import datetime
import http.server
import json
import statistics
import threading
import time
import urllib.request


def call(base, method, path, key, body=None, idem=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", "Bearer " + key)
    req.add_header("Content-Type", "application/json")
    if idem:
        req.add_header("Idempotency-Key", idem)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def metric(base, name):
    """The value of the series `name` on the server's /metrics, or None when it has no such series."""
    with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
    return None


def feed_reads(base):
    return metric(base, "wallet_webhook_feed_reads_total")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--operator-key", required=True)
    ap.add_argument("--transfers", type=int, default=1000)
    ap.add_argument("--endpoints", type=int, default=1)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--other-owners", type=int, default=0)
    a = ap.parse_args()

    arrivals = {}  # path -> [(event createdAt, arrival time)]
    lock = threading.Lock()

    class receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            now = time.time()
            created = json.loads(body)["createdAt"]
            with lock:
                arrivals.setdefault(self.path, []).append((created, now))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    op = a.operator_key
    tag = str(int(time.time() * 1000))
    merchant = call(a.url, "POST", "/v1/principals", op, {"name": "bench-m-" + tag, "role": "merchant"})
    payer = call(a.url, "POST", "/v1/principals", op, {"name": "bench-p-" + tag, "role": "user"})
    m_acc = call(a.url, "POST", "/v1/accounts", op, {"ownerId": merchant["id"], "currency": "EUR"})["id"]
    p_acc = call(a.url, "POST", "/v1/accounts", op, {"ownerId": payer["id"], "currency": "EUR"})["id"]
    call(a.url, "POST", "/v1/deposits", op, {"accountId": p_acc, "amount": 10 ** 12}, "bench-dep-" + tag)
    for i in range(a.endpoints):
        call(a.url, "POST", "/v1/webhook-endpoints", merchant["apiKey"],
             {"url": "http://127.0.0.1:%d/e%d" % (port, i), "events": ["TRANSFER"]})
    for i in range(a.other_owners):
        other = call(a.url, "POST", "/v1/principals", op, {"name": "bench-o%d-%s" % (i, tag), "role": "merchant"})
        call(a.url, "POST", "/v1/accounts", op, {"ownerId": other["id"], "currency": "EUR"})
        call(a.url, "POST", "/v1/webhook-endpoints", other["apiKey"],
             {"url": "http://127.0.0.1:%d/o%d" % (port, i), "events": ["TRANSFER"]})

    reads_before = feed_reads(a.url)
    made_before = metric(a.url, "wallet_webhook_deliveries_created_total") or 0
    fanned_out = []  # when the server had made a delivery of every event (its fan-out done)
    def watch_fan_out():
        while time.time() - start < 600:
            if (metric(a.url, "wallet_webhook_deliveries_created_total") or 0) - made_before >= a.transfers * a.endpoints:
                fanned_out.append(time.time())
                return
            time.sleep(0.02)
    start = time.time()
    threading.Thread(target=watch_fan_out, daemon=True).start()
    def pay(k):
        for i in range(k, a.transfers, a.threads):
            call(a.url, "POST", "/v1/transfers", payer["apiKey"],
                 {"fromAccountId": p_acc, "toAccountId": m_acc, "amount": 1}, "bench-t-%s-%d" % (tag, i))
    threads = [threading.Thread(target=pay, args=(k,)) for k in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    paid = time.time()
    deadline = paid + 600
    while time.time() < deadline:
        with lock:
            if len(arrivals) == a.endpoints and all(len(v) >= a.transfers for v in arrivals.values()):
                break
        time.sleep(0.05)
    done = time.time()
    total = sum(len(v) for v in arrivals.values())
    print("transfers %d in %.2f s (%.0f/s); deliveries %d of %d, last one %.2f s after the first payment: %.0f deliveries/s"
          % (a.transfers, paid - start, a.transfers / (paid - start), total, a.transfers * a.endpoints, done - start,
             total / (done - start)))
    if fanned_out:
        print("  every delivery made %.2f s after the first payment, %.2f s after the last one's answer"
              % (fanned_out[0] - start, fanned_out[0] - paid))
    reads = feed_reads(a.url)
    if reads is not None and reads_before is not None:
        print("  feed reads by the fan-out: %d (%d endpoints live)" % (reads - reads_before, a.endpoints + a.other_owners))
    for path, v in sorted(arrivals.items()):
        lat = sorted(t - datetime.datetime.strptime(c, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp() for c, t in v)
        print("  endpoint %s: %d deliveries, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms"
              % (path, len(v), 1000 * statistics.median(lat), 1000 * lat[int(0.99 * (len(lat) - 1))], 1000 * lat[-1]))


if __name__ == "__main__":
    main()
