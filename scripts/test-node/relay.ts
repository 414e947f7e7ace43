// Byte relays that join the test node's network namespace to the host's loopback without giving
// the host namespace an address or a route. A unix socket is a file, so it is reachable from both
// namespaces; each relay process lives in one namespace and bridges a TCP side to a unix side.
//
//   node relay.ts --forward tcp:127.0.0.1:6443=unix:/state/api.sock      (in the node namespace)
//   node relay.ts --forward unix:/state/api.sock=tcp:127.0.0.1:6443      (in the host namespace)
//   node relay.ts --connect-proxy unix:/state/node.sock --allow 10.200.0.2/32,10.244.0.0/24
//
// --connect-proxy is an HTTP CONNECT proxy on a unix socket: kube-apiserver's egress selector
// ('cluster' traffic: logs, exec, port-forward, the proxy subresources) dials the kubelet and pods
// through it. It only dials the allowed ranges, so it cannot be used to reach anything else.
import { rmSync } from 'node:fs';
import net, { type Socket } from 'node:net';

type Endpoint = { kind: 'tcp'; host: string; port: number } | { kind: 'unix'; path: string };

function fail(msg: string): never {
  process.stderr.write(`relay: ${msg}\n`);
  process.exit(2);
}

function parseEndpoint(s: string): Endpoint {
  if (s.startsWith('unix:')) return { kind: 'unix', path: s.slice(5) };
  const m = /^tcp:(.+):(\d+)$/.exec(s);
  if (!m?.[1] || !m[2]) fail(`bad endpoint '${s}' (tcp:HOST:PORT or unix:PATH)`);
  return { kind: 'tcp', host: m[1], port: Number(m[2]) };
}

function dial(to: Endpoint): Socket {
  return to.kind === 'unix' ? net.connect(to.path) : net.connect(to.port, to.host);
}

/** Pipes two sockets both ways; an error or close on either side ends both. */
function join(a: Socket, b: Socket): void {
  const end = (): void => {
    a.destroy();
    b.destroy();
  };
  a.on('error', end).on('close', end);
  b.on('error', end).on('close', end);
  a.pipe(b);
  b.pipe(a);
}

function listen(server: net.Server, on: Endpoint): void {
  server.on('error', (err) => fail(`listen ${JSON.stringify(on)}: ${err.message}`));
  if (on.kind === 'unix') {
    // A socket file left by a killed relay would make listen fail with EADDRINUSE.
    rmSync(on.path, { force: true });
    server.listen(on.path);
  } else {
    server.listen(on.port, on.host);
  }
}

function forward(spec: string): void {
  const [from, to] = spec.split('=');
  if (!from || !to) fail(`bad --forward '${spec}' (FROM=TO)`);
  const target = parseEndpoint(to);
  listen(
    net.createServer((client) => join(client, dial(target))),
    parseEndpoint(from),
  );
}

function ipv4ToInt(ip: string): number | undefined {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) return undefined;
  return parts.reduce((acc, p) => acc * 256 + p, 0);
}

function inRanges(ip: string, ranges: string[]): boolean {
  const n = ipv4ToInt(ip);
  if (n === undefined) return false;
  return ranges.some((r) => {
    const [base, bits] = r.split('/');
    const b = ipv4ToInt(base ?? '');
    const len = Number(bits ?? 32);
    if (b === undefined) return false;
    const size = 2 ** (32 - len);
    return Math.floor(n / size) === Math.floor(b / size);
  });
}

/** Reads one CONNECT request head, then tunnels; anything else is answered and closed. */
function connectProxy(on: string, allowed: string[]): void {
  const server = net.createServer((client) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const endAt = head.indexOf('\r\n\r\n');
      if (endAt < 0) {
        if (head.length > 8192) client.end('HTTP/1.1 431 Request Header Fields Too Large\r\n\r\n');
        return;
      }
      client.off('data', onData);
      client.pause();
      const m = /^CONNECT ([0-9.]+):(\d+) HTTP\/1\.[01]\r\n/.exec(head.toString('latin1', 0, endAt + 2));
      if (!m?.[1] || !m[2]) return void client.end('HTTP/1.1 405 Method Not Allowed\r\n\r\n');
      if (!inRanges(m[1], allowed)) return void client.end('HTTP/1.1 403 Forbidden\r\n\r\n');
      const rest = head.subarray(endAt + 4);
      const upstream = net.connect(Number(m[2]), m[1]);
      const refuse = (): void => void client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
      upstream.once('error', refuse);
      upstream.once('connect', () => {
        upstream.off('error', refuse);
        client.write('HTTP/1.1 200 Connection established\r\n\r\n');
        if (rest.length > 0) upstream.write(rest);
        join(client, upstream);
        client.resume();
      });
    };
    client.on('data', onData);
    client.on('error', () => client.destroy());
  });
  listen(server, parseEndpoint(on));
}

function main(argv: string[]): void {
  let allowed: string[] = [];
  const proxies: string[] = [];
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) fail(`${flag} needs a value`);
    if (flag === '--forward') forward(value);
    else if (flag === '--connect-proxy') proxies.push(value);
    else if (flag === '--allow') allowed = value.split(',');
    else fail(`unknown flag ${flag}`);
  }
  for (const p of proxies) connectProxy(p, allowed);
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, () => process.exit(0));
}

main(process.argv.slice(2));
