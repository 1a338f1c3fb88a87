#!/usr/bin/env python3
"""The live view in a real browser, for live_view_test.sh: drives headless
chromium over its DevTools pipe (--remote-debugging-pipe: JSON messages
ended by a NUL byte, commands on its fd 3, answers on its fd 4), so that
one page stays open across the end of the run and the process's exit.

  live_view_browser.py --chromium PATH --url http://127.0.0.1:PORT
      --report-html FILE --report FILE --shots DIR --work DIR

1. mid-round: once /status shows round 2 under way with both clients in a
   phase of the round (downloading, evaluating, training or uploading), one
   of them training, it opens the page, keeps its DOM and
   DIR/live_view_mid_round.png, and checks that the DOM names Client1 and
   Client2 in such phases, with round 1's accuracy drawn.
2. final: it keeps the page open until the view no longer answers (the
   process has exited), waits for the page's next refresh, keeps
   DIR/live_view_final.png and checks that the page still shows the final
   state (completed, the report's final accuracy) and says the process is
   gone.
3. static: it opens --report-html (file://), keeps
   DIR/live_view_report_html.png and checks the same final state, the
   clients done, the rounds drawn, and no script.

Prints one line per check; exits 0 iff all held.
"""
import argparse
import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

MID_ROUND = ("downloading", "evaluating", "training", "uploading")


class Browser:
    """Headless chromium, one page, commands over the DevTools pipe."""

    def __init__(self, chromium, profile, width, height):
        cmd_r, self.cmd_w = os.pipe()  # we write, chromium reads on fd 3
        self.res_r, res_w = os.pipe()  # chromium writes on fd 4

        def wire():
            os.dup2(cmd_r, 3)
            os.dup2(res_w, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--no-first-run",
             "--user-data-dir=" + profile, "--remote-debugging-pipe",
             "about:blank"],
            preexec_fn=wire, pass_fds=(3, 4), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=open(profile + ".log", "wb"))
        os.close(cmd_r)
        os.close(res_w)
        self.buffer = b""
        self.next_id = 0
        target = self.call("Target.createTarget", url="about:blank")
        self.session = self.call("Target.attachToTarget", flatten=True,
                                 targetId=target["targetId"])["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True,
                  width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def call(self, method, session=False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            while b"\0" not in self.buffer:
                chunk = os.read(self.res_r, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
        raise RuntimeError(f"{method}: no answer within 30 s")

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", session=True, expression=expression,
                      returnByValue=True)
        return r["result"].get("value")

    def open(self, url):
        self.call("Page.navigate", session=True, url=url)
        for _ in range(200):
            if self.evaluate("document.readyState") == "complete":
                return
            time.sleep(0.05)
        raise RuntimeError(url + ": not loaded within 10 s")

    def dom(self):
        return self.evaluate("document.documentElement.outerHTML")

    def screenshot(self, path):
        """The page down to the end of its content."""
        height = self.evaluate("document.documentElement.scrollHeight")
        width = self.evaluate("document.documentElement.scrollWidth")
        data = self.call("Page.captureScreenshot", session=True, format="png",
                         captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": width,
                               "height": height, "scale": 1})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            self.call("Browser.close")
        except RuntimeError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)


def status(url):
    """/status as JSON, or None once nothing answers."""
    try:
        with urllib.request.urlopen(url + "/status", timeout=2) as r:
            return json.load(r)
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


def phases_in(dom):
    """{client: phase} of the DOM's client rows."""
    return dict(re.findall(
        r'<tr class="client" data-client="([^"]*)" data-phase="([a-z]+)"',
        dom))


def mid_round(browser, args):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        s = status(args.url)
        if s is None or s["status"] != "running" or s["final_evaluation"]:
            check(False, "the run went by without a moment of round 2 with "
                         "its clients in it, one training")
            return
        phases = [c["phase"] for c in s["clients"]]
        if s["round"] == 2 and len(phases) == 2 and "training" in phases and \
                all(p in MID_ROUND for p in phases):
            break
        time.sleep(0.1)
    else:
        check(False, "no moment of round 2 with its clients in it, one "
                     "training, within 120 s")
        return
    browser.open(args.url + "/")
    dom = browser.dom()
    shot = browser.screenshot(os.path.join(args.shots,
                                           "live_view_mid_round.png"))
    phases = phases_in(dom)
    check(sorted(phases) == ["Client1", "Client2"] and
          all(p in MID_ROUND for p in phases.values()),
          f"mid-round the page shows each client's phase: {phases}")
    m = re.search(r'id="round">(\d+)<.*?id="completed">(\d+)<', dom, re.S)
    check(m is not None and int(m.group(1)) == int(m.group(2)) + 1,
          "mid-round the round under way follows the rounds completed: " +
          (f"round {m.group(1)}, completed {m.group(2)}" if m else "none"))
    check('<svg id="rounds-chart"' in dom and "<path d=\"M" in dom,
          "the rounds' accuracy and loss are drawn")
    check(re.search(r"(download|evaluate|train) \d+\.\d s", dom) is not None,
          "the time in each phase is shown")
    check(os.path.getsize(shot) > 10000, "screenshot " + shot)
    with open(os.path.join(args.work, "mid_round.html"), "w") as f:
        f.write(dom)


def final_page(browser, args):
    """Returns the report's final accuracy, as the pages print it."""
    deadline = time.monotonic() + 300
    while status(args.url) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)  # the page's next refresh fails
    with open(args.report) as f:  # whole: the process has exited
        report = json.load(f)
    accuracy = f"{report['rounds'][-1]['test_accuracy']:.4f}"
    dom = browser.dom()
    shot = browser.screenshot(os.path.join(args.shots, "live_view_final.png"))
    gone = browser.evaluate(
        "(() => { const g = document.getElementById('gone');"
        " return g.hidden ? '' : g.textContent; })()")
    check("process is gone" in (gone or ""),
          f"after the exit the page says so: {gone!r}")
    check('data-ended="1"' in dom and
          'id="final-status">completed<' in dom,
          "after the exit the page keeps the final state: completed")
    check(f'id="final-accuracy">{accuracy}<' in dom,
          f"after the exit the page shows the final accuracy {accuracy}")
    check(os.path.getsize(shot) > 10000, "screenshot " + shot)
    with open(os.path.join(args.work, "final.html"), "w") as f:
        f.write(dom)
    return accuracy


def static_page(browser, args, accuracy):
    text = open(args.report_html).read()
    check("<script" not in text and "http://" not in text and
          "https://" not in text,
          "the static page has no script and fetches nothing")
    browser.open("file://" + os.path.abspath(args.report_html))
    dom = browser.dom()
    shot = browser.screenshot(os.path.join(args.shots,
                                           "live_view_report_html.png"))
    check(f'id="final-accuracy">{accuracy}<' in dom and
          'id="final-status">completed<' in dom,
          f"the static page shows the run completed, accuracy {accuracy}")
    phases = phases_in(dom)
    check(phases == {"Client1": "done", "Client2": "done"},
          f"the static page shows the clients done: {phases}")
    rounds = re.findall(r'<tr class="round"><td>(\d+)</td>', dom)
    check(sorted(rounds) == ["1", "2"], f"and rounds {rounds}")
    check(os.path.getsize(shot) > 10000, "screenshot " + shot)


def main():
    p = argparse.ArgumentParser()
    for name in ("--chromium", "--url", "--report-html", "--report",
                 "--shots", "--work"):
        p.add_argument(name, required=True)
    args = p.parse_args()
    browser = Browser(args.chromium, os.path.join(args.work, "chrome"),
                      1100, 900)
    try:
        mid_round(browser, args)
        accuracy = final_page(browser, args)
        static_page(browser, args, accuracy)
    finally:
        browser.close()
    print(f"screenshots: {args.shots}/live_view_mid_round.png "
          f"{args.shots}/live_view_final.png "
          f"{args.shots}/live_view_report_html.png")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
