"""A real `deepinfer serve` on a free loopback port, for the evaluator: started, waited for with a
bounded wait, asked over HTTP, stopped (SIGTERM, then SIGKILL) at the end."""
import json
import re
import subprocess
import threading
import time
import urllib.request


class ChatServer:
    def __init__(self, deepinfer, model_dir, threads=2, start_timeout_s=120):
        self.proc = subprocess.Popen([deepinfer, "serve", "--model", model_dir, "--host", "127.0.0.1", "--port", "0",
                                      "--threads", str(threads)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.base = None
        found = threading.Event()

        def read():
            for line in self.proc.stdout:
                m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
                if m and not found.is_set():
                    self.base = m.group(1)
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(start_timeout_s):
            self.stop()
            raise RuntimeError(f"deepinfer serve did not start: {self.proc.stderr.read()[:2000]}")
        with urllib.request.urlopen(self.base + "/v1/models", timeout=30) as r:
            self.model = json.load(r)["data"][0]["id"]

    def chat(self, messages, max_tokens=64, **extra):
        body = {"model": self.model, "messages": messages, "temperature": 0, "max_tokens": max_tokens, **extra}
        req = urllib.request.Request(self.base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.load(r)["choices"][0]["message"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
