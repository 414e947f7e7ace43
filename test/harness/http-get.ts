import http from 'node:http';
import https from 'node:https';

/** One GET to a loopback port (optionally with a Host header); status 0 when it fails or times out. */
export function httpGet(
  port: number,
  path: string,
  host?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.get(
      { host: '127.0.0.1', port, path, timeout: 10_000, headers: host ? { host } : {} },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '' }));
  });
}

/** The body of one HTTPS GET to a loopback port, with host as both SNI and Host header. */
export function httpsBody(
  port: number,
  path: string,
  host: string,
  tls: Pick<https.RequestOptions, 'ca' | 'rejectUnauthorized' | 'checkServerIdentity'>,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      { host: '127.0.0.1', port, path, servername: host, headers: { host }, ...tls },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      },
    );
    req.on('error', reject);
  });
}
