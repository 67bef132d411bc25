"""Starting `deepinfer serve` / `route` processes for the P/D benchmarks (pd_latency.py, pd_vs_colocated.py)."""
import subprocess
import threading
import time


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
