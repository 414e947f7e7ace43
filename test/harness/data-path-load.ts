// The "app" of data-path e2e tests: sends GETs through the sidecar's egress listener the way an
// app with HTTP_PROXY does (absolute-form over a keep-alive pool), one every INTERVAL ms, cycling
// over the URLs, for DURATION ms (both bounded), then prints a JSON summary on stdout.
// usage: node data-path-load.ts PROXY_PORT INTERVAL_MS DURATION_MS URL...
import { Agent, request } from 'node:http';

const [portText = '7400', intervalText = '20', durationText = '10000', ...urls] = process.argv.slice(2);
const interval = Math.max(5, Number(intervalText));
const duration = Math.min(600_000, Number(durationText));
const agent = new Agent({ keepAlive: true, maxSockets: 16 });
const failures: { url: string; at: number; status: number; error: string; body: string }[] = [];
const servedBy: Record<string, Record<string, number>> = {};
let total = 0;
let failed = 0;
let done = 0;
const started = Date.now();

function one(url: string): void {
  total++;
  const at = Date.now() - started;
  const fail = (status: number, error: string, body: string): void => {
    failed++;
    if (failures.length < 50) failures.push({ url, at, status, error, body: body.slice(0, 200) });
  };
  const req = request(
    { host: '127.0.0.1', port: Number(portText), path: url, agent, timeout: 10_000 },
    (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => {
        done++;
        if (res.statusCode === 200) {
          const m = (servedBy[url] ??= {});
          m[body] = (m[body] ?? 0) + 1;
        } else fail(res.statusCode ?? 0, String(res.headers['x-outrigger-error'] ?? ''), body);
      });
    },
  );
  req.on('timeout', () => req.destroy(new Error('client timeout')));
  req.on('error', (e) => {
    done++;
    fail(0, e.message, '');
  });
  req.end();
}

let i = 0;
const timer = setInterval(() => {
  if (Date.now() - started >= duration) {
    clearInterval(timer);
    const wait = setInterval(() => {
      if (done >= total || Date.now() - started > duration + 15_000) {
        clearInterval(wait);
        process.stdout.write(JSON.stringify({ total, done, failed, failures, servedBy }) + '\n');
        agent.destroy();
      }
    }, 50);
    return;
  }
  one(urls[i++ % urls.length] ?? '/');
}, interval);
