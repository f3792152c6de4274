#!/usr/bin/python3
"""The dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by
python3-selenium) against a real `gpulab serve` on the test dockerd, at 1280x800 and 375x812:
sign in; a GPU chart drawn from samples of GPUs declared in the config; create a container and
see it appear; stop, start, delete it; a second user neither sees it nor may open it (403);
'<script>' in a name and in a log line shows as text; a change without the CSRF token is refused;
signing out ends the session. Screenshots of each page go to --screenshots DIR.

Usage: browser_test.py GPULAB_BINARY [--screenshots DIR]     Exit 77: skipped (reason printed).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
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


def ensure_image(host, work):
    if subprocess.run(["docker", "-H", host, "image", "inspect", XSS_IMAGE],
                      capture_output=True).returncode == 0:
        return
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "bin"))
    shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
    for app in ["sh", "sleep", "echo", "cat"]:
        os.symlink("busybox", os.path.join(root, "bin", app))
    tar = subprocess.run(["tar", "-C", root, "-cf", "-", "."], check=True, capture_output=True).stdout
    cmd = json.dumps(["/bin/sh", "-c", f"echo '{XSS_LOG}'; while true; do sleep 1; done"])
    docker(host, "import", "--change", f"CMD {cmd}", "-", XSS_IMAGE, input=tar)


class Serve:
    def __init__(self, gpulab, work, host):
        self.work = work
        base = random.randrange(30000, 40000, 100)
        cfg = {
            "listen": "127.0.0.1:0", "db": f"{work}/service.db", "backup_dir": f"{work}/backups",
            "docker_host": host, "auth_required": True, "device_mode": "none",
            "ssh_port_base": base, "image_allowlist": ["gpulab-test/*"],
            "gpus": [{"uuid": "GPU-6f3a2b1c-8d4e-4f5a-9b7c-2e1d0a9f8c71", "index": 0,
                      "vendor": "nvidia", "name": "H100 (declared)"},
                     {"uuid": "GPU-dashboard-1", "index": 1, "vendor": "nvidia",
                      "name": "declared, no samples"}],
            "dashboard": {"sample_seconds": 1, "history_seconds": 600, "gpu_sample_root": FIXTURE},
        }
        with open(f"{work}/config.json", "w") as f:
            json.dump(cfg, f)
        self.cmd = [gpulab, "serve", "--config", f"{work}/config.json"]
        self.tokens = {u: self.add_user(u, u == "root") for u in ["alice", "bob", "root"]}
        self.log = open(f"{work}/service.log", "w")
        self.proc = subprocess.Popen(self.cmd + ["--port-file", f"{work}/port"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(f"{work}/port") and open(f"{work}/port").read().strip():
                break
            if self.proc.poll() is not None:
                fail("gpulab serve exited: " + open(f"{work}/service.log").read()[-2000:])
            time.sleep(0.1)
        self.url = f"http://127.0.0.1:{open(f'{work}/port').read().strip()}"

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


def browser(width, height):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={tempfile.mkdtemp(prefix='gpulab-chrome-')}",
              f"--window-size={width},{height}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=ChromeService("/usr/bin/chromedriver"), options=opts)
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
            fail(f"{self.size}: timed out waiting for {what}; page text: {self.text()[:1500]}")

    def text(self):
        try:
            return self.d.find_element(By.TAG_NAME, "body").text
        except Exception:  # noqa: BLE001 - only for the failure message
            return "(no body)"

    def css(self, sel):
        return self.d.find_elements(By.CSS_SELECTOR, sel)

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
        self.d.get(self.url + "/")
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

    def row(self, name):
        rows = [r for r in self.css("#containers tbody tr") if r.get_attribute("data-name") == name]
        return rows[0] if rows else None

    def click_in_row(self, name, cls, confirm=True):
        self.row(name).find_element(By.CSS_SELECTOR, cls).click()
        if confirm:
            WebDriverWait(self.d, 5).until(lambda d: d.switch_to.alert).accept()


def painted_pixels(page, card):
    return page.d.execute_script(
        "const c = arguments[0].querySelector('canvas'); if (!c) return -1;"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n;", card)


def run_size(svc, size, shots):
    w, h = size
    tag = f"d{w}"
    name = f"{tag}-alice"
    alice = Page(browser(w, h), svc.url, shots, size)
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
        if "alice" not in alice.css("#user")[0].text:
            fail(f"{size}: header shows {alice.css('#user')[0].text!r}, not alice")

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
        alice.wait(lambda: "● live" in alice.css("#live")[0].text, "the live event stream")
        alice.shot("overview")

        # Create: a bad name shows the service's validation message, as text.
        alice.go("containers")
        alice.wait(lambda: alice.css("#create-form"), "the create form")
        alice.css("#c-name")[0].send_keys(XSS_NAME)
        alice.css("#c-image")[0].send_keys(XSS_IMAGE)
        alice.css("#c-create")[0].click()
        alice.wait(lambda: alice.css(".error"), "the validation error")
        err = alice.css(".error")[0].text
        if "<script>" not in err or alice.d.execute_script("return window.__xss_name") is not None:
            fail(f"{size}: '<script>' in a name was not shown as text: {err!r}")
        print(f"ok {size}: validation message shown as text: {err.splitlines()[0]!r}")
        alice.css("#c-name")[0].clear()
        alice.css("#c-name")[0].send_keys(name)
        alice.css("#c-create")[0].click()
        alice.wait(lambda: alice.row(name) is not None, "the new container's row")
        alice.wait(lambda: alice.row(name).get_attribute("data-state") == "running", "running")
        print(f"ok {size}: created {name}, it appeared running")
        alice.shot("containers")

        # CSRF: the same change without (or with a wrong) token is refused and changes nothing.
        for hdrs in [{"Content-Type": "application/json"},
                     {"Content-Type": "application/json", "X-CSRF-Token": "forged"}]:
            st = alice.d.execute_async_script(
                "const [h, n, done] = arguments;"
                "fetch('/api/v1/gpu-docker/stop', {method: 'POST', headers: h,"
                " body: JSON.stringify({name: n}), credentials: 'same-origin'})"
                ".then(r => r.json().then(j => done([r.status, j.error_code])))"
                ".catch(e => done(String(e)));", hdrs, name)
            if st[0] != 403:
                fail(f"{size}: a change without the CSRF token answered {st}")
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row again")
        if alice.row(name).get_attribute("data-state") != "running":
            fail(f"{size}: the refused request stopped the container")
        print(f"ok {size}: POST without / with a forged CSRF token -> 403, container still running")

        # Stop, start (live: the row changes without a reload).
        alice.click_in_row(name, ".act-stop")
        alice.wait(lambda: alice.row(name) and alice.row(name).get_attribute("data-state") != "running",
                   "the container stopped")
        alice.click_in_row(name, ".act-start", confirm=False)
        alice.wait(lambda: alice.row(name) and alice.row(name).get_attribute("data-state") == "running",
                   "the container running again")
        print(f"ok {size}: stop and start")

        # The log line with <script> is text, in the container's own page.
        alice.go(f"containers/{name}")
        alice.wait(lambda: "hello from the lab" in (alice.css("#logs")[0].text if alice.css("#logs") else ""),
                   "the log line")
        if "<script>" not in alice.css("#logs")[0].text or \
                alice.d.execute_script("return window.__xss_log") is not None:
            fail(f"{size}: the log line was not shown as text")
        alice.wait(lambda: alice.css("#ssh"), "the SSH command")
        print(f"ok {size}: log line shown as text; SSH command {alice.css('#ssh')[0].text!r}")
        alice.shot("container-detail")

        # A snapshot, for the snapshots page.
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row")
        alice.row(name).find_element(By.CSS_SELECTOR, ".act-snapshot").click()
        WebDriverWait(alice.d, 5).until(lambda d: d.switch_to.alert).accept()
        alice.go("images")
        alice.wait(lambda: any(r.get_attribute("data-name") == f"{name}-snap"
                               for r in alice.css("#snapshots tbody tr")), "the snapshot")
        alice.shot("images")
        snap = [r for r in alice.css("#snapshots tbody tr")
                if r.get_attribute("data-name") == f"{name}-snap"][0]
        snap.find_element(By.CSS_SELECTOR, "button.danger").click()
        WebDriverWait(alice.d, 5).until(lambda d: d.switch_to.alert).accept()
        alice.wait(lambda: not any(r.get_attribute("data-name") == f"{name}-snap"
                                   for r in alice.css("#snapshots tbody tr")), "the snapshot to go")
        print(f"ok {size}: snapshot listed and deleted")

        # Bob: does not see alice's container; its page and its API URL answer 403.
        bob = Page(browser(w, h), svc.url, shots, size)
        bob.sign_in(svc.tokens["bob"])
        bob.go("containers")
        bob.wait(lambda: bob.css("#no-containers") or bob.css("#containers tbody tr"), "bob's list")
        if bob.row(name) is not None or name in bob.text():
            fail(f"{size}: bob sees alice's container")
        bob.go(f"containers/{name}")
        bob.wait(lambda: bob.css("#detail .error"), "bob's refusal")
        if not bob.css("#detail .error")[0].text.startswith("403"):
            fail(f"{size}: bob's page for alice's container: {bob.css('#detail .error')[0].text!r}")
        for path in [f"/api/v1/gpu-docker/stats?name={name}", f"/api/v1/gpu-docker/logs?name={name}"]:
            if bob.fetch_status(path) != 403:
                fail(f"{size}: bob got {bob.fetch_status(path)} on {path}")
        print(f"ok {size}: bob does not see {name}; its page and API URLs answer 403")
        if size == SIZES[0]:
            bob.shot("forbidden")

        # Delete (with confirmation); the row goes.
        alice.go("containers")
        alice.wait(lambda: alice.row(name) is not None, "the row")
        alice.click_in_row(name, ".act-delete")
        alice.wait(lambda: alice.row(name) is None, "the row to go")
        print(f"ok {size}: deleted")

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
                token = p.css("#new-token")[0].text
                st, body = svc.request("/api/v1/gpu-docker/list",
                                       headers={"Authorization": f"Bearer {token}"})
                if st != 200:
                    fail(f"the token made on the admin page does not work: {st} {body}")
                print("ok: admin page made a working token for carol")
            p.shot("admin")
        finally:
            p.d.quit()


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
    try:
        ensure_image(host, work)
        svc = Serve(os.path.abspath(args.gpulab), work, host)
        for size in SIZES:
            run_size(svc, size, args.screenshots)
        run_admin(svc, args.screenshots)
        print("PASS: dashboard browser tests at " + ", ".join(f"{w}x{h}" for w, h in SIZES))
    except AssertionError as e:
        print(f"FAIL: {e}")
        if svc:
            print(open(f"{work}/service.log").read()[-3000:])
        return 1
    finally:
        if svc:
            svc.stop()
        for w, _ in SIZES:
            subprocess.run(["docker", "-H", host, "rm", "-f", f"d{w}-alice"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
