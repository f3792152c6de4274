#!/usr/bin/python3
"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by
python3-selenium) against a real `gpulab serve` on the test dockerd, at 1280x800 and 375x812.
Everything is done as a user would, by clicking in the page, and checked twice: in the page and
through the API. Sign in; a GPU chart drawn from samples of GPUs declared in the config; create a
container (with a GPU) and see it appear; stop, start; snapshot; back up, download the backup,
upload it again and restore a container from it; delete all of it. A second user neither sees
the first user's containers, snapshots or backups nor may act on them with a request forged from
his own session (403/404, nothing changed). '<script>' in a name and in a log line shows as text;
a change without the CSRF token is refused; signing out ends the session. An admin sets a quota
on the Admin page; the user sees usage and limits, and a create beyond the quota shows
QUOTA_EXCEEDED with its hint. On a lab of hosts (the test's dockerd under one name and then
another, one engine that refuses connections) the Admin page lists the hosts with their state,
and a host taken out of the config is forgotten with its Forget... button. Screenshots of each
page go to --screenshots DIR.

Usage: browser_test.py GPULAB_BINARY [--screenshots DIR]     Exit 77: skipped (reason printed).
"""
import argparse
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SIZES = [(1280, 800), (375, 812)]
XSS_IMAGE = "gpulab-test/dashboard-xss:latest"
XSS_LOG = "<script>window.__xss_log=1</script> hello from the lab"
XSS_NAME = "<script>window.__xss_name=1</script>"
# The declared GPUs carry the uuids of a captured H100 host, whose recorded values the dashboard
# samples (config dashboard.gpu_sample_root) as it would a live GPU.
FIXTURE = os.path.join(REPO, "tests", "fixtures", "h100")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    raise AssertionError(why)


try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.chrome.service import Service as ChromeService
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    skip("python3-selenium is not installed (scripts/install-deps.sh installs it)")


def start_engine():
    host = os.environ.get("GPULAB_TEST_DOCKER_HOST")
    if host:
        return host
    name = os.environ.get("GPULAB_TEST_DOCKER_NAME", "main")
    p = subprocess.run([os.path.join(REPO, "tests/integration/dockerd/start-dockerd.sh"), name],
                       capture_output=True, text=True)
    if p.returncode == 77:
        skip("no dockerd here: " + p.stderr.strip().splitlines()[-1] if p.stderr else "no dockerd")
    if p.returncode != 0:
        fail("dockerd did not start: " + p.stderr[-2000:])
    return p.stdout.strip()


def docker(host, *args, **kw):
    return subprocess.run(["docker", "-H", host, *args], check=True, capture_output=True, **kw)


# The shell is PID 1 and PID 1 has no default signal actions: without the trap it ignored the
# stop's SIGTERM and each stop waited the service's whole stop timeout (10 s) for the SIGKILL.
XSS_CMD = ["/bin/sh", "-c",
           f"trap 'exit 0' TERM; echo '{XSS_LOG}'; while true; do sleep 1; done"]


def ensure_image(host, work):
    """The test image, made again when the engine holds one with another command."""
    have = subprocess.run(["docker", "-H", host, "image", "inspect", "--format",
                           "{{json .Config.Cmd}}", XSS_IMAGE], capture_output=True, text=True)
    if have.returncode == 0 and json.loads(have.stdout) == XSS_CMD:
        return
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
    for app in ["sh", "sleep", "echo", "cat"]:
        os.symlink("busybox", os.path.join(root, "bin", app))
    tar = subprocess.run(["tar", "-C", root, "-cf", "-", "."], check=True, capture_output=True).stdout
    docker(host, "import", "--change", f"CMD {json.dumps(XSS_CMD)}", "-", XSS_IMAGE, input=tar)


def port_block():
    """A block of 1100 host ports no other test process holds: the same lock files as the C++
    service tests (tests/service/service_env.cpp), 22 blocks in 7000-31199, below the ephemeral
    range where the browser's own connections would make a container's port 'already in use'.
    The lock is held until this process exits."""
    start = os.getpid() % 22
    for i in range(22):
        block = (start + i) % 22
        f = open(f"/tmp/gpulab-test-ports-{block}.lock", "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _held_locks.append(f)
        return 7000 + block * 1100
    return 7000 + start * 1100  # every block taken: share one


_held_locks = []


class Serve:
    def __init__(self, gpulab, work, host, hosts=None):
        """One engine (`host`) with two declared GPUs, or the lab's `hosts` (config entries)."""
        self.work, self.engine, self.base = work, host, port_block()
        self.write_config(hosts)
        self.cmd = [gpulab, "serve", "--config", f"{work}/config.json"]
        self.tokens = {u: self.add_user(u, u == "root") for u in ["alice", "bob", "root"]}
        self.start()

    def write_config(self, hosts):
        work = self.work
        cfg = {
            "listen": "127.0.0.1:0", "db": f"{work}/service.db", "backup_dir": f"{work}/backups",
            "auth_required": True, "device_mode": "none", "ssh_user": "lab",
            "ssh_port_base": self.base, "image_allowlist": ["gpulab-test/*"],
            "dashboard": {"sample_seconds": 1, "history_seconds": 600, "gpu_sample_root": FIXTURE},
        }
        if hosts:
            cfg["hosts"] = hosts
        else:
            cfg["docker_host"] = self.engine
            cfg["gpus"] = [{"uuid": "GPU-6f3a2b1c-8d4e-4f5a-9b7c-2e1d0a9f8c71", "index": 0,
                            "vendor": "nvidia", "name": "H100 (declared)"},
                           {"uuid": "GPU-dashboard-1", "index": 1, "vendor": "nvidia",
                            "name": "declared, no samples"}]
        with open(f"{work}/config.json", "w") as f:
            json.dump(cfg, f)

    def start(self):
        work = self.work
        if os.path.exists(f"{work}/port"):
            os.remove(f"{work}/port")
        self.log = open(f"{work}/service.log", "a")
        self.proc = subprocess.Popen(self.cmd + ["--port-file", f"{work}/port"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(f"{work}/port") and open(f"{work}/port").read().strip():
                break
            if self.proc.poll() is not None:
                fail("gpulab serve exited: " + open(f"{work}/service.log").read()[-2000:])
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{open(f'{work}/port').read().strip()}"

    def restart(self, hosts):
        """Stops the service and starts it again on the same book with these hosts."""
        self.stop()
        self.write_config(hosts)
        self.start()

    def add_user(self, name, admin):
        args = self.cmd + ["--add-user", name] + (["--admin"] if admin else [])
        return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def request(self, path, method="GET", body=None, headers=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def api(self, user, path, method="GET", body=None):
        """The API as `user` (with the token, not the browser): what really happened."""
        st, out = self.request("/api/v1/gpu-docker" + path, method, body,
                               {"Authorization": f"Bearer {self.tokens[user]}"})
        if st != 200:
            fail(f"API {method} {path} as {user}: {st} {out}")
        return out["data"]

    def container(self, user, name):
        return next((c for c in self.api(user, "/list")["containers"] if c["name"] == name), None)

    def backup(self, user, name):
        return next((b for b in self.api(user, "/backups")["backups"] if b["backup_name"] == name),
                    None)

    def snapshot_names(self, user):
        return {x["snapshot_name"] for x in self.api(user, "/snapshots")["snapshots"]}


PROFILES = []  # each browser's profile folder, removed at the end


def browser(width, height, downloads=None):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # Page.console() reads it
    PROFILES.append(tempfile.mkdtemp(prefix="gpulab-chrome-"))
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={PROFILES[-1]}",
              f"--window-size={width},{height}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=ChromeService("/usr/bin/chromedriver"), options=opts)
    if downloads:  # headless Chromium saves downloads only where it is told to
        d.execute_cdp_cmd("Browser.setDownloadBehavior",
                          {"behavior": "allow", "downloadPath": downloads})
    # The exact viewport (a phone's is a touch, mobile one).
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1,
                       "mobile": width < 600})
    return d


class Page:
    def __init__(self, driver, url, shots, size):
        self.d, self.url, self.shots, self.size = driver, url, shots, size

    def wait(self, cond, what, timeout=45):  # generous: CI machines are shared and slow
        def check(_):
            try:
                return cond()
            except StaleElementReferenceException:  # the page re-rendered under us: look again
                return False
        try:
            return WebDriverWait(self.d, timeout).until(check)
        except TimeoutException:
            fail(f"{self.size}: timed out waiting for {what}; page text: {self.text()[:1500]}"
                 f"\nbrowser console: {self.console()}")

    def console(self):
        """The browser's console (failed loads show there: net::ERR_...), for failure messages."""
        try:
            return "; ".join(e.get("message", "") for e in self.d.get_log("browser"))[-3000:]
        except Exception as e:  # noqa: BLE001 - only for the failure message
            return f"(unavailable: {e})"

    def text(self):
        try:
            return self.d.find_element(By.TAG_NAME, "body").text
        except Exception:  # noqa: BLE001 - only for the failure message
            return "(no body)"

    def css(self, sel):
        return self.d.find_elements(By.CSS_SELECTOR, sel)

    def text_of(self, sel):
        """The first match's text ("" if none); looks again when the page re-renders under us
        (server-sent updates replace elements between finding one and reading it)."""
        for _ in range(20):
            els = self.css(sel)
            if not els:
                return ""
            try:
                return els[0].text
            except StaleElementReferenceException:
                time.sleep(0.05)
        fail(f"{self.size}: {sel} kept re-rendering")

    def go(self, hash_):
        self.d.get(f"{self.url}/#/{hash_}")

    def shot(self, name):
        if self.shots:
            w, h = self.size
            # Full page height, so a screenshot shows the whole page and not only the first screen.
            height = self.d.execute_script("return document.documentElement.scrollHeight")
            self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": w, "height": max(h, min(height, 2400)),
                                    "deviceScaleFactor": 1, "mobile": w < 600})
            time.sleep(0.3)
            self.d.save_screenshot(os.path.join(self.shots, f"{name}-{w}x{h}.png"))
            self.d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": w, "height": h, "deviceScaleFactor": 1,
                                    "mobile": w < 600})

    def sign_in(self, token):
        # Under make sanitize a load was left without the app: Chromium dropped a module's request
        # (net::ERR_NETWORK_CHANGED) when the parallel Docker tests added or removed a network
        # interface. Said loudly with the console, then loaded again; a third failed load fails.
        for attempt in range(3):
            self.d.get(self.url + "/")
            try:
                WebDriverWait(self.d, 45).until(lambda _: self.css("#token"))
                break
            except TimeoutException:
                print(f"RELOAD {self.size}: load {attempt + 1} shows no sign-in form; console: "
                      f"{self.console()}")
        self.wait(lambda: self.css("#token"), "the sign-in form")
        self.css("#token")[0].send_keys(token)
        self.css("#signin")[0].click()
        self.wait(lambda: self.css("#user"), "the signed-in header")

    def fetch_status(self, path, method="GET", headers=None):
        return self.d.execute_async_script(
            "const [p, m, h, done] = arguments;"
            "fetch(p, {method: m, headers: h, credentials: 'same-origin'})"
            ".then(r => done(r.status)).catch(e => done(String(e)));",
            path, method, headers or {})

    def fetch_json(self, path, method="GET", body=None, headers=None):
        """A request from the page itself, with its session cookie: [status, error_code]."""
        return self.d.execute_async_script(
            "const [p, m, b, h, done] = arguments;"
            "fetch(p, {method: m, headers: h, body: b === null ? undefined : JSON.stringify(b),"
            " credentials: 'same-origin'})"
            ".then(r => r.text().then(t => { let j = null; try { j = JSON.parse(t); } catch (e) {}"
            " done([r.status, j && j.error_code]); }))"
            ".catch(e => done([String(e), null]));",
            path, method, body, headers or {})

    def csrf(self):
        return self.d.execute_async_script(
            "const done = arguments[0]; fetch('/api/v1/gpu-docker/session',"
            " {credentials: 'same-origin'}).then(r => r.json()).then(j => done(j.data.csrf_token));")

    def fill(self, sel, value):
        """Replaces a field's text by typing over it: the page sees input events, as from a
        user (clear() alone fires none, and Preact would put the old value back)."""
        el = self.css(sel)[0]
        el.send_keys(Keys.CONTROL, "a")
        el.send_keys(Keys.BACKSPACE)
        if value:
            el.send_keys(value)

    def table_row(self, table, name):
        rows = [r for r in self.css(f"#{table} tbody tr") if r.get_attribute("data-name") == name]
        return rows[0] if rows else None

    def row(self, name):
        return self.table_row("containers", name)

    def answer(self, confirm=True):
        """Accepts the confirm() or prompt() (with its suggested value) an action opened."""
        if confirm:
            WebDriverWait(self.d, 5).until(lambda d: d.switch_to.alert).accept()

    def click_in_row(self, name, cls, confirm=True, table="containers"):
        self.table_row(table, name).find_element(By.CSS_SELECTOR, cls).click()
        self.answer(confirm)

    def notice(self):
        return self.text_of("#notice") if self.css("#notice") else ""

    def wait_state(self, name, state):
        self.wait(lambda: self.row(name) and self.row(name).get_attribute("data-state") == state,
                  f"{name} {state}")


def painted_pixels(page, card):
    return page.d.execute_script(
        "const c = arguments[0].querySelector('canvas'); if (!c) return -1;"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n;", card)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_size(svc, size, shots, work):
    w, h = size
    tag = f"d{w}"
    name = f"{tag}-alice"
    snap, bk, moved = f"{name}-snap", f"{name}-backup", f"{name}-moved"
    restored = f"{moved}-r"
    downloads = os.path.join(work, f"downloads-{w}")
    os.makedirs(downloads)
    alice = Page(browser(w, h, downloads), svc.url, shots, size)
    bob = None
    try:
        # Signed out: the sign-in page; a wrong token is refused with the service's message.
        alice.d.get(svc.url + "/")
        alice.wait(lambda: alice.css("#token"), "the sign-in form")
        alice.shot("signin")
        alice.css("#token")[0].send_keys("glt_wrong")
        alice.css("#signin")[0].click()
        alice.wait(lambda: "Invalid API token" in alice.text(), "the refusal of a wrong token")
        alice.sign_in(svc.tokens["alice"])
        if "alice" not in alice.text_of("#user"):
            fail(f"{size}: header shows {alice.text_of('#user')!r}, not alice")

        # Overview: both declared GPUs; the sampled one has a drawn chart with several samples.
        alice.wait(lambda: len(alice.css("#gpus .gpu")) == 2, "two GPU cards")
        card = [c for c in alice.css("#gpus .gpu")
                if c.get_attribute("data-uuid").startswith("GPU-6f3a")][0]
        alice.wait(lambda: int(card.find_element(By.CSS_SELECTOR, ".chart")
                               .get_attribute("data-samples") or 0) >= 3, "3 samples in the chart")
        if painted_pixels(alice, card) <= 0:
            fail(f"{size}: the GPU chart's canvas is blank")
        if not re.search(r"\d+ °C", card.text) or not re.search(r"\d+ W", card.text):
            fail(f"{size}: no temperature from the samples: {card.text!r}")
        samples = int(card.find_element(By.CSS_SELECTOR, ".chart").get_attribute("data-samples"))
        print(f"ok {size}: overview, GPU chart with {samples} samples, "
              f"{painted_pixels(alice, card)} painted pixels")
        alice.wait(lambda: "● live" in alice.text_of("#live"), "the live event stream")
        alice.wait(lambda: alice.css("#quota #no-quota"), "the quota card (no limits yet)")
        alice.shot("overview")

        # Create: a bad name shows the service's validation message, as text.
        alice.go("containers")
        alice.wait(lambda: alice.css("#create-form"), "the create form")
        alice.fill("#c-name", XSS_NAME)
        alice.fill("#c-image", XSS_IMAGE)
        alice.css("#c-create")[0].click()
        alice.wait(lambda: alice.css(".error"), "the validation error")
        err = alice.text_of(".error")
        if "<script>" not in err or alice.d.execute_script("return window.__xss_name") is not None:
            fail(f"{size}: '<script>' in a name was not shown as text: {err!r}")
        print(f"ok {size}: validation message shown as text: {err.splitlines()[0]!r}")
        alice.fill("#c-name", name)
        alice.fill("#c-gpus", "1")
        alice.css("#c-create")[0].click()
        alice.wait(lambda: alice.row(name) is not None, "the new container's row")
        alice.wait_state(name, "running")
        c = svc.container("alice", name)
        if not c or c["state"] != "running" or len(c["gpu_devices"]) != 1 or c["owner"] != "alice":
            fail(f"{size}: the API does not show {name} running with one GPU: {c}")
        gpu = c["gpu_devices"][0]
        if alice.row(name).find_elements(By.TAG_NAME, "td")[2].text != str(gpu):
            fail(f"{size}: the row does not show GPU {gpu}: {alice.row(name).text!r}")
        print(f"ok {size}: created {name} with GPU {gpu}; it appeared running (page and API)")
        alice.shot("containers")

        # CSRF: the same change without (or with a wrong) token is refused and changes nothing.
        for hdrs in [{"Content-Type": "application/json"},
                     {"Content-Type": "application/json", "X-CSRF-Token": "forged"}]:
            st = alice.fetch_json("/api/v1/gpu-docker/stop", "POST", {"name": name}, hdrs)
            if st[0] != 403:
                fail(f"{size}: a change without the CSRF token answered {st}")
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row again")
        if alice.row(name).get_attribute("data-state") != "running" or \
                svc.container("alice", name)["state"] != "running":
            fail(f"{size}: the refused request stopped the container")
        print(f"ok {size}: POST without / with a forged CSRF token -> 403, container still running")

        # Stop, start (live: the row changes without a reload); the API agrees each time.
        alice.click_in_row(name, ".act-stop")
        alice.wait(lambda: alice.row(name) and alice.row(name).get_attribute("data-state") != "running",
                   "the container stopped")
        if svc.container("alice", name)["state"] == "running":
            fail(f"{size}: the page shows {name} stopped but the API says running")
        alice.click_in_row(name, ".act-start", confirm=False)
        alice.wait_state(name, "running")
        if svc.container("alice", name)["state"] != "running":
            fail(f"{size}: the page shows {name} running but the API does not")
        print(f"ok {size}: stop and start (page and API)")

        # Its SSH port taken while it is stopped (a listener here, where the engine publishes it):
        # the start moves it to a new one, and the page says which.
        alice.click_in_row(name, ".act-stop")
        alice.wait(lambda: alice.row(name) and alice.row(name).get_attribute("data-state") != "running",
                   "the container stopped")
        old_port = svc.container("alice", name)["ssh_port"]
        with socket.socket() as squat:
            squat.bind(("0.0.0.0", old_port))
            squat.listen()
            alice.click_in_row(name, ".act-start", confirm=False)
            alice.wait(lambda: "on a new SSH port" in alice.notice(), "the new SSH port's notice")
        alice.wait_state(name, "running")
        c = svc.container("alice", name)
        said = f"start: {name} done, on a new SSH port {c['ssh_port']} ({old_port} was taken on its host)"
        if c["ssh_port"] == old_port or said not in alice.notice():
            fail(f"{size}: after its SSH port {old_port} was taken: API {c['ssh_port']}, page "
                 f"{alice.notice()!r}")
        print(f"ok {size}: start with its SSH port taken: {alice.notice()!r}")

        # The log line with <script> is text, in the container's own page.
        alice.go(f"containers/{name}")
        alice.wait(lambda: "hello from the lab" in (alice.text_of("#logs") if alice.css("#logs") else ""),
                   "the log line")
        if "<script>" not in alice.text_of("#logs") or \
                alice.d.execute_script("return window.__xss_log") is not None:
            fail(f"{size}: the log line was not shown as text")
        alice.wait(lambda: alice.css("#ssh"), "the SSH command")
        if not re.fullmatch(rf"ssh -p {c['ssh_port']} lab@\S+", alice.text_of("#ssh")):
            fail(f"{size}: the SSH command is not the service's: {alice.text_of('#ssh')!r}")
        print(f"ok {size}: log line shown as text; SSH command {alice.text_of('#ssh')!r}")
        alice.shot("container-detail")

        # The overview names alice's own container as its GPU's holder.
        alice.go("overview")
        alice.wait(lambda: any(c.find_element(By.CSS_SELECTOR, ".holder").text == name
                               for c in alice.css("#gpus .gpu")), f"{name} as a GPU's holder")

        # Snapshot: the row's button, the name the prompt suggests; it shows on the other page.
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row")
        alice.click_in_row(name, ".act-snapshot")
        alice.wait(lambda: f"snapshot {snap} of {name} made" in alice.notice(),
                   "the snapshot's notice")
        if snap not in svc.snapshot_names("alice"):
            fail(f"{size}: the API does not list the snapshot {snap}")
        alice.go("images")
        alice.wait(lambda: alice.table_row("snapshots", snap) is not None, "the snapshot's row")
        print(f"ok {size}: snapshot {snap} made (page and API)")

        # Backup: the row's button; the notice says it is written; the API has it complete.
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row")
        alice.click_in_row(name, ".act-backup")
        alice.wait(lambda: f"backup {bk} of {name} written" in alice.notice(),
                   "the backup's notice", timeout=120)
        b = svc.backup("alice", bk)
        if not b or b["state"] != "complete" or not b["sha256"] or b["owner"] != "alice":
            fail(f"{size}: the API does not show backup {bk} complete: {b}")
        alice.go("images")
        alice.wait(lambda: alice.table_row("backups", bk) is not None and
                   alice.table_row("backups", bk).get_attribute("data-state") == "complete",
                   "the backup's row, complete")
        print(f"ok {size}: backup {bk} written, {b['bytes_total']} bytes (page and API)")

        # Download: the row's link saves the file; it is the very file the service holds.
        alice.click_in_row(bk, ".act-download", confirm=False, table="backups")
        alice.wait(lambda: [f for f in glob.glob(os.path.join(downloads, "*.tar"))],
                   "the downloaded backup", timeout=60)
        got = glob.glob(os.path.join(downloads, "*.tar"))[0]
        alice.wait(lambda: not glob.glob(os.path.join(downloads, "*.crdownload")) and
                   os.path.getsize(got) == b["bytes_total"], "the download to finish", timeout=60)
        if sha256(got) != b["sha256"]:
            fail(f"{size}: the downloaded {os.path.basename(got)} differs from the backup's sha256")
        print(f"ok {size}: downloaded {os.path.basename(got)}, sha256 matches the API's")

        # Upload that file under a new name (as one moves a container to another machine).
        alice.fill("#u-name", moved)
        alice.css("#u-file")[0].send_keys(got)
        alice.css("#u-upload")[0].click()
        alice.wait(lambda: f"uploaded {moved}" in alice.notice(), "the upload's notice",
                   timeout=120)
        alice.wait(lambda: alice.table_row("backups", moved) is not None,
                   "the uploaded backup's row")
        m = svc.backup("alice", moved)
        if not m or m["state"] != "complete" or m["sha256"] != b["sha256"]:
            fail(f"{size}: the API does not show the upload {moved} complete and intact: {m}")
        if alice.css("#u-name")[0].get_attribute("value"):
            fail(f"{size}: the upload form was not cleared")
        print(f"ok {size}: uploaded it again as {moved} (page and API, same sha256)")

        # Restore a container from the uploaded backup: it runs what the backup holds.
        alice.click_in_row(moved, ".act-restore", table="backups")
        alice.wait(lambda: f"restored {restored}" in alice.notice(), "the restore's notice",
                   timeout=120)
        alice.shot("images")
        alice.go("containers")
        alice.wait(lambda: alice.row(restored) is not None, "the restored container's row")
        alice.wait_state(restored, "running")
        r = svc.container("alice", restored)
        if not r or r["state"] != "running" or \
                not r.get("engine_image", "").startswith("gpulab-backup:"):
            fail(f"{size}: the API does not show {restored} running from the backup: {r}")
        # Shown by the image it was created from, on the page and in the API.
        if r["image"] != XSS_IMAGE or XSS_IMAGE not in alice.row(restored).text:
            fail(f"{size}: {restored} is not shown as made from {XSS_IMAGE}: {r}")
        for _ in range(100):
            logs = svc.api("alice", f"/logs?name={restored}&tail=20")
            if "hello from the lab" in logs.get("stdout", ""):
                break
            time.sleep(0.2)
        else:
            fail(f"{size}: {restored} does not run the backed-up command: {logs}")
        print(f"ok {size}: restored {restored} from {moved}: running {r['engine_image']}, "
              f"shown as {r['image']} (page and API)")

        # Bob: does not see alice's containers, snapshots, backups or her GPU's holder.
        bob = Page(browser(w, h), svc.url, shots, size)
        bob.sign_in(svc.tokens["bob"])
        bob.wait(lambda: len(bob.css("#gpus .gpu")) == 2, "bob's overview")
        # Bob learns that a GPU is taken, not by what.
        bob.wait(lambda: any(c.find_element(By.CSS_SELECTOR, ".title .state").text == "held" and
                             c.find_element(By.CSS_SELECTOR, ".holder").text == "another user"
                             for c in bob.css("#gpus .gpu")), "alice's GPU shown to bob as held")
        bob.go("containers")
        bob.wait(lambda: bob.css("#no-containers") or bob.css("#containers tbody tr"), "bob's list")
        bob.go("images")
        bob.wait(lambda: bob.css("#no-snapshots") and bob.css("#no-backups"), "bob's empty images")
        for page in ["overview", "containers", "images"]:
            bob.go(page)
            time.sleep(1)
            for secret in [name, restored, snap, bk, moved]:
                if secret in bob.text():
                    fail(f"{size}: bob's {page} page shows alice's {secret}: {bob.text()[:800]}")
        bob.go(f"containers/{name}")
        bob.wait(lambda: bob.css("#detail .error"), "bob's refusal")
        if not bob.text_of("#detail .error").startswith("403"):
            fail(f"{size}: bob's page for alice's container: {bob.text_of('#detail .error')!r}")
        for path in [f"/api/v1/gpu-docker/stats?name={name}",
                     f"/api/v1/gpu-docker/logs?name={name}",
                     f"/api/v1/gpu-docker/backups/download?backup_name={bk}"]:
            if bob.fetch_status(path) not in (403, 404):
                fail(f"{size}: bob got {bob.fetch_status(path)} on {path}")
        print(f"ok {size}: bob's pages show none of alice's containers, snapshots, backups; "
              "her container's page and API URLs answer 403")
        if size == SIZES[0]:
            bob.shot("forbidden")

        # Bob forges changes to alice's things with his own session and a valid CSRF token.
        hdrs = {"Content-Type": "application/json", "X-CSRF-Token": bob.csrf()}
        forged = [("/stop", {"name": name}), ("/restart", {"name": name}),
                  ("/delete", {"name": restored}),
                  ("/snapshot", {"name": name, "snapshot_name": f"{tag}-bob"}),
                  ("/backup", {"name": name, "backup_name": f"{tag}-bob"}),
                  ("/restore", {"backup_path": f"backup_{bk}.tar", "name": f"{tag}-bob"}),
                  ("/restore-snapshot", {"snapshot_name": snap, "name": f"{tag}-bob"}),
                  ("/delete-snapshot", {"snapshot_name": snap}),
                  ("/backups/delete", {"backup_name": moved})]
        for path, body in forged:
            st = bob.fetch_json("/api/v1/gpu-docker" + path, "POST", body, hdrs)
            if st[0] not in (403, 404):
                fail(f"{size}: bob's forged POST {path} {body} answered {st}")
        for who, cname in [("alice", name), ("alice", restored)]:
            if svc.container(who, cname)["state"] != "running":
                fail(f"{size}: bob's forged requests changed {cname}")
        if svc.snapshot_names("alice") != {snap} or \
                {x["backup_name"] for x in svc.api("alice", "/backups")["backups"]} != {bk, moved}:
            fail(f"{size}: bob's forged requests changed alice's snapshots or backups")
        if svc.container("root", f"{tag}-bob") or svc.api("bob", "/snapshots")["snapshots"] or \
                svc.api("bob", "/backups")["backups"]:
            fail(f"{size}: bob's forged requests made something")
        print(f"ok {size}: {len(forged)} forged changes from bob's session -> 403/404, "
              "nothing changed (API)")

        # Clean up through the page: snapshot, both backups, both containers.
        alice.go("images")
        alice.wait(lambda: alice.table_row("snapshots", snap) is not None, "the snapshot's row")
        alice.click_in_row(snap, ".act-delete", table="snapshots")
        alice.wait(lambda: alice.table_row("snapshots", snap) is None, "the snapshot to go")
        for x in [bk, moved]:
            alice.wait(lambda: alice.table_row("backups", x) is not None, f"{x}'s row")
            alice.click_in_row(x, ".act-delete", table="backups")
            alice.wait(lambda: alice.table_row("backups", x) is None, f"{x} to go")
        if svc.snapshot_names("alice") or svc.api("alice", "/backups")["backups"]:
            fail(f"{size}: the API still lists what the page deleted")
        print(f"ok {size}: snapshot and both backups deleted (page and API)")
        alice.go("containers")
        for x in [restored, name]:
            alice.wait(lambda: alice.row(x) is not None, f"{x}'s row")
            alice.click_in_row(x, ".act-delete")
            alice.wait(lambda: alice.row(x) is None, f"{x}'s row to go")
            if svc.container("alice", x):
                fail(f"{size}: the API still lists {x}")
        print(f"ok {size}: deleted {restored} and {name} (page and API)")

        # Sign out: the page asks for a token again, and the old cookie is refused.
        cookie = alice.d.get_cookie("gpulab_session")
        if not cookie or not cookie.get("httpOnly"):
            fail(f"{size}: the session cookie is missing or not HttpOnly: {cookie}")
        alice.css("#signout")[0].click()
        alice.wait(lambda: alice.css("#token"), "the sign-in form after signing out")
        st, body = svc.request("/api/v1/gpu-docker/list",
                               headers={"Cookie": f"gpulab_session={cookie['value']}"})
        if st != 401:
            fail(f"{size}: the ended session's cookie answered {st}: {body}")
        print(f"ok {size}: signed out; the old session cookie -> 401")
    finally:
        alice.d.quit()
        if bob:
            bob.d.quit()


def run_admin(svc, shots):
    for size in SIZES:
        p = Page(browser(*size), svc.url, shots, size)
        try:
            p.sign_in(svc.tokens["root"])
            p.go("admin")
            p.wait(lambda: len(p.css("#audit tbody tr")) > 0 and len(p.css("#users tbody tr")) >= 3,
                   "users and the audit log")
            if size == SIZES[0]:
                p.css("#new-user")[0].send_keys("carol")
                p.css("#create-token")[0].click()
                p.wait(lambda: p.css("#new-token"), "carol's new token")
                token = p.text_of("#new-token")
                st, body = svc.request("/api/v1/gpu-docker/list",
                                       headers={"Authorization": f"Bearer {token}"})
                if st != 200:
                    fail(f"the token made on the admin page does not work: {st} {body}")
                print("ok: admin page made a working token for carol")

                # A quota for alice: one container, 2 CPUs, 1 GiB; a bad value shows its message.
                p.fill("#q-user", "alice")
                p.fill("#q-cpus", "lots")
                p.css("#q-set")[0].click()
                p.wait(lambda: p.css(".error") and "Invalid cpus 'lots'" in p.text_of(".error"),
                       "the refusal of a bad CPU limit")
                for field, value in [("#q-containers", "1"), ("#q-cpus", "2"), ("#q-memory", "1g")]:
                    p.fill(field, value)
                p.css("#q-set")[0].click()
                p.wait(lambda: "quota of alice set" in p.text(), "the quota's notice")
                limits = svc.api("alice", "/quotas")["limits"]
                if (limits["max_containers"], limits["max_cpus"], limits["max_memory_bytes"]) != \
                        (1, 2, 1 << 30):
                    fail(f"the quota set on the admin page is not in the API: {limits}")
                row = [r for r in p.css("#quotas tbody tr")
                       if r.get_attribute("data-user") == "alice"]
                if not row or "0 / 1" not in row[0].text or "1.0 GiB" not in row[0].text:
                    fail("the admin page's quota table: " +
                         (repr(row[0].text) if row else "no row for alice"))
                print(f"ok: admin page set alice's quota ({row[0].text!r}); the API has it")
            p.shot("admin")
        finally:
            p.d.quit()


def run_hosts(gpulab, engine, work, shots):
    """The Admin page's Hosts section on a lab of three hosts: "old" and then "lab" are names of
    the test's own dockerd (never both at once: a config naming one engine twice is refused),
    "gone" an engine that refuses connections (down from the start). Alice makes a container on
    "old"; the service restarts with "lab" instead of "old", and the book keeps old's rows.
    The page lists the configured hosts with their state (gone: down, with the reason) and "old"
    among the retired hosts with rows; its Forget... button shows the dry run in the confirm
    prompt, then forgets it: the service's message as a notice, the row gone, and the API and
    the audit log agree."""
    lab = {"name": "lab", "url": engine,
           "gpus": [{"uuid": "GPU-hosts-lab-0", "index": 0, "vendor": "nvidia"}]}
    old = {"name": "old", "url": engine,
           "gpus": [{"uuid": "GPU-hosts-old-0", "index": 0, "vendor": "nvidia"}]}
    gone = {"name": "gone", "url": "tcp://127.0.0.1:1", "insecure": True}
    hw = os.path.join(work, "hosts")
    os.makedirs(hw)
    svc = Serve(gpulab, hw, engine, hosts=[old, gone])
    p = None
    try:
        svc.api("alice", "/create", "POST", {"name": "h-old", "image": XSS_IMAGE,
                                             "gpu_count": 1, "host": "old"})
        svc.restart([lab, gone])
        p = Page(browser(*SIZES[0]), svc.url, shots, SIZES[0])
        p.sign_in(svc.tokens["root"])
        p.go("admin")
        p.wait(lambda: p.table_row("hosts", "lab") is not None and
               p.table_row("hosts", "gone") is not None, "the configured hosts")
        up, down = p.table_row("hosts", "lab"), p.table_row("hosts", "gone")
        if up.get_attribute("data-state") != "up" or down.get_attribute("data-state") != "down":
            fail(f"hosts' states: lab {up.text!r}, gone {down.text!r}")
        reason = next(h for h in svc.api("root", "/hosts")["hosts"] if h["name"] == "gone")
        if not reason.get("down_reason") or reason["down_reason"] not in down.text:
            fail(f"gone's row lacks its down reason {reason.get('down_reason')!r}: {down.text!r}")
        if p.table_row("hosts", "old") is not None:
            fail("the retired host is listed among the configured ones")
        print(f"ok: hosts listed: lab up, gone down ({reason['down_reason'][:60]!r}...)")

        p.wait(lambda: p.table_row("retired", "old") is not None, "the retired host's row")
        row = p.table_row("retired", "old").text
        if "alice" not in row:
            fail(f"the retired host's row does not name its owner: {row!r}")
        p.shot("hosts")
        p.table_row("retired", "old").find_element(By.CSS_SELECTOR, ".act-forget").click()
        # The prompt comes after the dry run's answer, not at the click: wait for it.
        alert = WebDriverWait(p.d, 45).until(expected_conditions.alert_is_present())
        prompt = alert.text
        for want in ["Forget host old?", "alice: h-old", "GPU-hosts-old-0"]:
            if want not in prompt:
                alert.dismiss()
                fail(f"the forget prompt lacks {want!r}: {prompt!r}")
        if not svc.api("root", "/hosts")["retired"]:
            fail("the dry run forgot the host")
        alert.accept()
        p.wait(lambda: "Forgot 1 container(s) on host 'old'" in
               (p.text_of("#host-notice") if p.css("#host-notice") else ""), "the forget notice")
        p.wait(lambda: p.css("#no-retired"), "the retired host's row to go")
        if svc.api("root", "/hosts")["retired"] or svc.container("root", "h-old"):
            fail("the API still has the forgotten host's rows")
        audit = svc.api("root", "/audit?limit=50")["entries"]
        if not any(a["action"] == "forget-host" and a["target"] == "old" for a in audit) or \
                not any(a["action"] == "forget" and a["target"] == "h-old" for a in audit):
            fail(f"the audit log lacks the forget lines: {audit[:5]}")
        print(f"ok: forgot host old from the page (prompt: {prompt.splitlines()[2]!r}); "
              f"notice {p.text_of('#host-notice')!r}; API and audit agree")
    finally:
        if p:
            p.d.quit()
        svc.stop()


def run_quota(svc, size, shots):
    """Alice under the quota root set: usage and limits in the page; a create beyond it shows
    QUOTA_EXCEEDED with its hint, and nothing is made."""
    w, h = size
    one, two = f"q{w}-one", f"q{w}-two"
    p = Page(browser(w, h), svc.url, shots, size)

    def quota_row(key):
        rows = [r for r in p.css("#quota tr") if r.get_attribute("data-key") == key]
        return rows[0].text if rows else ""

    def create(name):
        for field, value in [("#c-name", name), ("#c-image", XSS_IMAGE), ("#c-cpus", "1"),
                             ("#c-memory", "256m")]:
            p.fill(field, value)
        p.css("#c-create")[0].click()

    try:
        p.sign_in(svc.tokens["alice"])
        p.wait(lambda: "0 / 1" in quota_row("containers") and "0 / 2" in quota_row("cpus") and
               "1.0 GiB" in quota_row("memory_bytes") and "no limit" in quota_row("gpus"),
               "alice's quota on the overview")
        p.go("containers")
        p.wait(lambda: p.css("#quota-line") and "containers 0 / 1" in p.text_of("#quota-line"),
               "the quota beside the create form")
        create(one)
        p.wait_state(one, "running")
        p.wait(lambda: "containers 1 / 1" in p.text_of("#quota-line") and
               "memory 256 MiB / 1.0 GiB" in p.text_of("#quota-line"), "the quota in use")
        create(two)
        p.wait(lambda: p.css("#create-form ~ .error"), "the quota's refusal")
        err = p.text_of("#create-form ~ .error")
        for want in ["409", "QUOTA_EXCEEDED", "containers in use 1, asked 1, limit 1",
                     "ask an admin to raise the quota"]:
            if want not in err:
                fail(f"{size}: the quota's refusal lacks {want!r}: {err!r}")
        if svc.container("alice", two) or p.row(two) is not None:
            fail(f"{size}: a container beyond the quota was made")
        print(f"ok {size}: quota shown ({p.text_of('#quota-line')!r}); beyond it: "
              f"{err.splitlines()[0]!r} with its hint")
        p.shot("quota")
        p.go("overview")
        p.wait(lambda: "1 / 1" in quota_row("containers") and "1 / 2" in quota_row("cpus"),
               "the overview's quota in use")
        if size == SIZES[0]:
            p.shot("overview-quota")
        p.go("containers")
        p.wait(lambda: p.row(one) is not None, "the row")
        p.click_in_row(one, ".act-delete")
        p.wait(lambda: p.row(one) is None, "the row to go")
        if svc.container("alice", one):
            fail(f"{size}: the API still lists {one}")
    finally:
        p.d.quit()


def remove_test_containers(host):
    """The containers this test names, on its own engine: removed before and after a run."""
    for w, _ in SIZES:
        for c in [f"d{w}-alice", f"d{w}-alice-moved-r", f"q{w}-one", f"q{w}-two", "h-old"]:
            subprocess.run(["docker", "-H", host, "rm", "-f", c], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gpulab")
    ap.add_argument("--screenshots", default="")
    args = ap.parse_args()
    for exe, pkg in [("/usr/bin/chromium", "chromium"), ("/usr/bin/chromedriver", "chromium-driver")]:
        if not os.access(exe, os.X_OK):
            skip(f"{exe} missing (apt-get install {pkg}; scripts/install-deps.sh does)")
    if not shutil.which("busybox"):
        skip("no busybox (apt-get install busybox-static)")
    host = start_engine()
    work = tempfile.mkdtemp(prefix="gpulab-dashboard-")
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    svc = None
    # A run killed before its clean-up (a SIGKILL, the machine restarted) left its containers on
    # this test-private engine; the next run's creates met them as 409 NAME_CONFLICT.
    remove_test_containers(host)
    try:
        ensure_image(host, work)
        svc = Serve(os.path.abspath(args.gpulab), work, host)
        for size in SIZES:
            run_size(svc, size, args.screenshots, work)
        run_admin(svc, args.screenshots)
        for size in SIZES:
            run_quota(svc, size, args.screenshots)
        run_hosts(os.path.abspath(args.gpulab), host, work, args.screenshots)
        print("PASS: dashboard browser tests at " + ", ".join(f"{w}x{h}" for w, h in SIZES))
    except AssertionError as e:
        print(f"FAIL: {e}")
        if svc:
            print(open(f"{work}/service.log").read()[-3000:])
        return 1
    finally:
        if svc:
            svc.stop()
        remove_test_containers(host)
        shutil.rmtree(work, ignore_errors=True)
        for d in PROFILES:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
