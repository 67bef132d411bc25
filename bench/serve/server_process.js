// The server side of the load test: start `deepinfer serve` on an ephemeral loopback port, read its
// memory from /proc, scrape and parse /metrics, stop it with SIGTERM.
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');

// The command that runs `deepinfer serve ARGS`: the binary itself, or, with DS_E2E_EXPERT_PARALLEL=N
// in the environment, N expert-parallel ranks under `mpirun` (DS_MPIRUN, default mpirun;
// docs/expert-parallel.md). Every rank listens on its own ephemeral port; the first to print it is
// the front a test talks to, the others step in lockstep with it and serve their experts.
function serveCommand(deepinfer, args) {
  const ranks = process.env.DS_E2E_EXPERT_PARALLEL;
  if (!ranks) return [deepinfer, ['serve', ...args]];
  const extra = (process.env.DS_E2E_EP_ARGS || '').split(' ').filter((a) => a !== '');
  return [process.env.DS_MPIRUN || 'mpirun',
          ['--oversubscribe', '-np', ranks, deepinfer, 'serve', '--expert-parallel', ...extra, ...args]];
}

// Starts `deepinfer serve --model MODEL --port 0 ...extraArgs`; resolves once it prints its port.
function startServer(deepinfer, modelDir, extraArgs = [], startTimeoutMs = 120000) {
  return new Promise((resolve, reject) => {
    const [bin, args] = serveCommand(deepinfer, ['--model', modelDir, '--host', '127.0.0.1', '--port', '0',
                                                 ...extraArgs]);
    const proc = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`server did not start in ${startTimeoutMs} ms: ${err}`));
    }, startTimeoutMs);
    // Under mpirun, every rank must be listening (and so handling SIGTERM) before the test starts.
    const ranks = bin === deepinfer ? 1 : Number(process.env.DS_E2E_EXPERT_PARALLEL);
    proc.stdout.on('data', (d) => {
      out += d;
      const all = [...out.matchAll(/listening on http:\/\/127\.0\.0\.1:(\d+)/g)];
      const m = all.length >= ranks ? all[0] : null;
      if (m) {
        clearTimeout(timer);
        resolve({ proc, pid: proc.pid, port: Number(m[1]), base: `http://127.0.0.1:${m[1]}`, stderr: () => err,
                  mpirun: bin !== deepinfer });
      }
    });
    proc.stderr.on('data', (d) => {
      // Keep the tail only: a long run logs a line per request at most, which must not grow here.
      err = (err + d).slice(-20000);
    });
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening: ${err}`));
    });
  });
}

// The processes mpirun started (its ranks, on this machine).
function childPids(pid) {
  return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter((p) => p !== '').map(Number);
}

// SIGTERM; resolves with { code, signal } (a hang past timeoutMs is killed and reported as such).
// Under mpirun the ranks get the signal: mpirun (Open MPI 4.1) exits 1 when signalled itself even
// when every rank exits 0, and 0 when the ranks all exit 0.
function stopServer(server, timeoutMs = 30000) {
  return new Promise((resolve) => {
    server.proc.removeAllListeners('exit');
    const timer = setTimeout(() => server.proc.kill('SIGKILL'), timeoutMs);
    server.proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
    if (server.mpirun) {
      for (const pid of childPids(server.pid)) process.kill(pid, 'SIGTERM');
    } else {
      server.proc.kill('SIGTERM');
    }
  });
}

// VmRSS, VmHWM (kB) and the thread count of a process, from /proc/PID/status.
function readProcStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => {
    const m = text.match(new RegExp(`^${name}:\\s+(\\d+)`, 'm'));
    return m ? Number(m[1]) : null;
  };
  return { rss_kb: field('VmRSS'), hwm_kb: field('VmHWM'), threads: field('Threads') };
}

function httpGet(url) {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

// Prometheus text → { 'name{labels}': value } (labels as rendered, unlabelled series by name).
function parseMetrics(text) {
  const values = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = line.match(/^(\S+?(?:\{.*\})?) (\S+)$/);
    if (m) values[m[1]] = Number(m[2]);
  }
  return values;
}

async function scrapeMetrics(base) {
  const { status, text } = await httpGet(`${base}/metrics`);
  if (status !== 200) throw new Error(`/metrics answered ${status}`);
  return parseMetrics(text);
}

// Sum of deepinfer:request_success_total over its finished_reason labels.
function finishedRequests(m) {
  return Object.entries(m)
      .filter(([k]) => k.startsWith('deepinfer:request_success_total'))
      .reduce((s, [, v]) => s + v, 0);
}

// Polls /metrics until no request is running or waiting and at least minFinished requests have
// been recorded as finished (cancellations of dropped streams land a step or two after the client
// hung up, and a request leaves the running count a moment before its final event is recorded), or
// until timeoutMs passes; returns the last scrape.
async function scrapeWhenIdle(base, minFinished = 0, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await scrapeMetrics(base);
    const busy = m['deepinfer:num_requests_running'] + m['deepinfer:num_requests_waiting'];
    if ((busy === 0 && finishedRequests(m) >= minFinished) || Date.now() > deadline) return m;
    await new Promise((r) => setTimeout(r, 100));
  }
}

module.exports = { startServer, stopServer, readProcStatus, parseMetrics, scrapeMetrics, scrapeWhenIdle,
                   finishedRequests };
