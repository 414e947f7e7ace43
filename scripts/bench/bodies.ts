// Requests with bodies from 0 B to 1 MiB, up and down, at a fixed rate: what a sidecar holds when
// it carries files and API payloads, not 12-byte answers. Request i sends (odd rounds) or receives
// (even rounds) SIZES[i % SIZES.length] bytes; a request that would exceed the in-flight cap is
// counted as late and not sent, so the loop stays bounded in time and memory.
import http from 'node:http';

export const SIZES = [0, 1024, 16 * 1024, 256 * 1024, 1024 * 1024] as const;
const PAYLOAD = Buffer.alloc(SIZES.at(-1)!, 0x62);

/** Backend side: GET /bytes/N answers N bytes. */
export function serveBytes(url: string | undefined, res: http.ServerResponse): boolean {
  const m = /^\/bytes\/(\d+)$/.exec(url ?? '');
  if (!m) return false;
  const n = Math.min(Number(m[1]), PAYLOAD.length);
  res.writeHead(200, { 'content-length': n, 'content-type': 'application/octet-stream' });
  res.end(PAYLOAD.subarray(0, n));
  return true;
}

export interface BodiesResult {
  ok: number;
  errors: number;
  late: number;
  bytes: number;
}

export async function mixedBodies(
  t: { port: number; authority: string },
  o: { rate: number; durationMs: number; maxInFlight: number },
): Promise<BodiesResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.maxInFlight });
  const r: BodiesResult = { ok: 0, errors: 0, late: 0, bytes: 0 };
  let inFlight = 0;
  const one = (i: number): Promise<void> =>
    new Promise((resolve) => {
      const size = SIZES[i % SIZES.length]!;
      const up = Math.floor(i / SIZES.length) % 2 === 1;
      const req = http.request(
        {
          host: '127.0.0.1',
          port: t.port,
          agent,
          method: up ? 'POST' : 'GET',
          path: up ? '/upload' : `/bytes/${size}`,
          headers: { host: t.authority, ...(up ? { 'content-length': size } : {}) },
          timeout: 30_000,
        },
        (res) => {
          res.on('data', (d: Buffer) => (r.bytes += d.length));
          res.on('end', () => {
            if (res.statusCode === 200) r.ok++;
            else r.errors++;
            resolve();
          });
          res.on('error', () => (r.errors++, resolve()));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', () => (r.errors++, resolve()));
      if (up) r.bytes += size;
      req.end(up ? PAYLOAD.subarray(0, size) : undefined);
    });
  const pending: Promise<void>[] = [];
  const start = performance.now();
  const total = Math.floor((o.rate * o.durationMs) / 1000);
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / o.rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    if (inFlight >= o.maxInFlight) {
      r.late++;
      continue;
    }
    inFlight++;
    pending.push(one(i).then(() => void inFlight--));
  }
  await Promise.all(pending);
  agent.destroy();
  return r;
}
