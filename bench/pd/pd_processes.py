"""Starting `deepinfer serve` / `route` processes for the P/D benchmarks (pd_latency.py, pd_vs_colocated.py,
pd_load.py), and reading their /metrics."""
import subprocess
import threading
import time
import urllib.request


def start(cmd, name):
    """Starts `cmd`, waits up to 60 s for its 'listening on' line; returns (process, base URL)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = p.stdout.readline()
        if "listening on http://127.0.0.1:" in line:
            threading.Thread(target=p.stdout.read, daemon=True).start()
            return p, f"http://127.0.0.1:{int(line.split('127.0.0.1:')[1].split()[0])}"
        if not line and p.poll() is not None:
            raise SystemExit(f"{name} exited")
    p.kill()
    raise SystemExit(f"{name} did not start")


def metrics(base):
    """A server's /metrics as {name{labels}: value}."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as res:
        out = {}
        for line in res.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out
