#!/usr/bin/python3
"""Does an open dashboard slow the API? p95 latency of /status and /list from one client, with no
dashboard open and with ten open, in alternating rounds (A B A B ...) against one real
`gpulab serve` on the test dockerd (three running containers, two declared GPUs sampled every
second -- five times the default rate).

Each "dashboard" is what an open Overview page does, in a thread: it holds the event stream
(GET /events) and, as the page does, refetches /gpus, /status and /list on every "hello" or
"containers" event, and the GPU history once at start; "gpus" events arrive every second.
(Ten tabs of one real browser are not a fair stand-in: over HTTP/1.1 a browser opens at most six
connections per server, so only the visible tabs hold a stream; see docs/dashboard.md.)

Usage: bench/dashboard_load.py GPULAB_BINARY [--rounds 10] [--requests 1000]
Prints one line per round and the summary; exit 77 when dockerd cannot run here.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration", "dashboard"))
import browser_test as bt  # noqa: E402  (the engine, image and service set-up)


def p95(xs):
    return statistics.quantiles(xs, n=20)[18]


class Dashboard(threading.Thread):
    """The requests an open Overview page makes, over its own two connections."""

    def __init__(self, port, cookie, stop):
        super().__init__(daemon=True)
        self.port, self.cookie, self.stop, self.events = port, cookie, stop, 0

    def get(self, conn, path):
        conn.request("GET", "/api/v1/gpu-docker" + path, headers={"Cookie": self.cookie})
        r = conn.getresponse()
        r.read()
        return r.status

    def run(self):
        api = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        self.get(api, "/gpus/history")
        es = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        es.request("GET", "/api/v1/gpu-docker/events", headers={"Cookie": self.cookie})
        r = es.getresponse()
        event = ""
        while not self.stop.is_set():
            line = r.fp.readline().decode()
            if not line:
                break
            if line.startswith("event: "):
                event = line[7:].strip()
            elif line == "\n" and event:
                self.events += 1
                if event in ("hello", "containers"):
                    for p in ("/gpus", "/status", "/list"):
                        self.get(api, p)
                event = ""
        es.close()


def measure(port, token, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat = {"/status": [], "/list": []}
    for i in range(n):
        path = "/status" if i % 2 == 0 else "/list"
        t0 = time.perf_counter()
        conn.request("GET", "/api/v1/gpu-docker" + path,
                     headers={"Authorization": f"Bearer {token}"})
        r = conn.getresponse()
        r.read()
        lat[path].append((time.perf_counter() - t0) * 1000)
        if r.status != 200:
            raise SystemExit(f"{path} answered {r.status}")
    conn.close()
    return lat


def sign_in(svc, user):
    conn = http.client.HTTPConnection("127.0.0.1", int(svc.url.rsplit(":", 1)[1]))
    conn.request("POST", "/api/v1/gpu-docker/session", json.dumps({"token": svc.tokens[user]}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    return r.getheader("Set-Cookie").split(";")[0]


def open_dashboards(svc, port):
    stop = threading.Event()
    boards = [Dashboard(port, sign_in(svc, "alice"), stop) for _ in range(10)]
    for b in boards:
        b.start()
    time.sleep(2)

    def close():
        stop.set()
    return close, lambda: sum(b.events for b in boards)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpulab")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=1000)
    a = ap.parse_args()
    host = bt.start_engine()
    work = bt.tempfile.mkdtemp(prefix="gpulab-dashload-")
    bt.ensure_image(host, work)
    svc = bt.Serve(os.path.abspath(a.gpulab), work, host)
    port = int(svc.url.rsplit(":", 1)[1])
    names = [f"load-{i}" for i in range(3)]
    try:
        for n in names:
            st, body = svc.request("/api/v1/gpu-docker/create", "POST",
                                   {"name": n, "image": bt.XSS_IMAGE, "gpu_count": 0},
                                   {"Authorization": f"Bearer {svc.tokens['alice']}"})
            if st != 200:
                raise SystemExit(f"create {n}: {st} {body}")
        measure(port, svc.tokens["alice"], 40)  # warm-up
        res = {0: {"/status": [], "/list": []}, 10: {"/status": [], "/list": []}}
        per_round = {0: {"/status": [], "/list": []}, 10: {"/status": [], "/list": []}}
        for rnd in range(a.rounds):
            for k in (0, 10):
                close = info = None
                if k:
                    close, info = open_dashboards(svc, port)
                lat = measure(port, svc.tokens["alice"], a.requests)
                extra = f"  ({info()} events received)" if k else ""
                if close:
                    close()
                    time.sleep(1)
                for p in lat:
                    res[k][p] += lat[p]
                    per_round[k][p].append(p95(lat[p]))
                print(f"round {rnd + 1}, {k:2d} dashboards: " + ", ".join(
                    f"{p} p50 {statistics.median(v):.2f} ms p95 {p95(v):.2f} ms"
                    for p, v in lat.items()) + extra, flush=True)
        print(f"summary ({a.rounds} rounds x {a.requests // 2} requests per endpoint, "
              "simulated pages):")
        for p in ("/status", "/list"):
            b, d = p95(res[0][p]), p95(res[10][p])
            print(f"  {p:8s} p95: none open {b:.2f} ms, ten open {d:.2f} ms, change {100 * (d - b) / b:+.1f} %"
                  f"   (p50 {statistics.median(res[0][p]):.2f} -> {statistics.median(res[10][p]):.2f} ms)")
            # The machine's own noise moves a single round's p95 a lot: the median round is steadier.
            mb, md = statistics.median(per_round[0][p]), statistics.median(per_round[10][p])
            print(f"  {p:8s} median of the rounds' p95: none open {mb:.2f} ms, ten open {md:.2f} ms, "
                  f"change {100 * (md - mb) / mb:+.1f} %")
    finally:
        for n in names:
            svc.request("/api/v1/gpu-docker/delete", "POST", {"name": n},
                        {"Authorization": f"Bearer {svc.tokens['alice']}"})
        svc.stop()
        bt.shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
