"""Opens a page in headless Chromium at a given viewport and prints its self-test line.

    python3 tests/browser.py URL WIDTH HEIGHT [mobile]

Headless Chromium will not size a window below 500 px, so a phone's viewport is
set through the DevTools protocol (Emulation.setDeviceMetricsOverride), spoken over
--remote-debugging-pipe: JSON messages ending in NUL, in on fd 3, out on fd 4.
Standard library only; used by tests/end_to_end/html_browser.rs.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self):
        self.to_chrome_r, self.to_chrome_w = os.pipe()
        self.from_chrome_r, self.from_chrome_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="mongotap-cdp-")
        # The child's fds 3 and 4 must be these pipes: duplicate them there in the child.
        read_end, write_end = self.to_chrome_r, self.from_chrome_w

        def wire():
            r, w = os.dup(read_end), os.dup(write_end)  # out of the way of 3 and 4 first
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "about:blank"],
            close_fds=False, preexec_fn=wire, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(read_end)
        os.close(write_end)
        self.next_id, self.pending = 0, b""

    def call(self, method, params=None, session=None, timeout=20.0):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            while b"\0" in self.pending:
                raw, self.pending = self.pending.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply["result"]
            ready, _, _ = select.select([self.from_chrome_r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.from_chrome_r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self.pending += chunk
        raise TimeoutError(method)

    def close(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.profile], check=False)


def selftest(url, width, height, mobile):
    b = Browser()
    try:
        target = b.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        b.call("Emulation.setDeviceMetricsOverride",
               {"width": width, "height": height, "deviceScaleFactor": 3 if mobile else 1, "mobile": mobile}, session)
        b.call("Page.navigate", {"url": url}, session)
        for _ in range(100):
            line = b.call("Runtime.evaluate", {"returnByValue": True, "expression":
                          "(document.getElementById('selftest') || {}).textContent || ''"}, session)["result"]["value"]
            if line:
                return line
            time.sleep(0.1)
        return "no self-test line"
    finally:
        b.close()


if __name__ == "__main__":
    url, width, height = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    print(selftest(url, width, height, len(sys.argv) > 4 and sys.argv[4] == "mobile"))
