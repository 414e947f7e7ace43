// A tiny TCP program for capture tests, run inside a network namespace:
//   serve HOST PORT[,PORT...] [OWN,...]  answers every connection with one JSON line describing it
//                              (local address, peer, original destination, loop-guard verdict
//                              against the OWN ports, the sidecar's listeners)
//   dial HOST PORT [TIMEOUT_MS] connects, prints what the server said, exits (default 5 s)
import net from 'node:net';
import { isOwnListener, originalDestination } from '../../src/proxy/capture/original-destination.ts';

export interface EchoReport {
  listener: number;
  local: { address: string; port: number };
  remote: { address: string; port: number };
  original: { address: string; port: number } | null;
  ownListener: boolean;
  uid: number;
}

function serve(host: string, ports: number[], own: number[]): void {
  const listeners = own.map((port) => ({ address: host, port }));
  let ready = 0;
  for (const port of ports) {
    net
      .createServer((sock) => {
        const original = originalDestination(sock) ?? null;
        const report: EchoReport = {
          listener: port,
          local: { address: sock.localAddress ?? '', port: sock.localPort ?? 0 },
          remote: { address: sock.remoteAddress ?? '', port: sock.remotePort ?? 0 },
          original,
          ownListener: original !== null && isOwnListener(original, listeners),
          uid: process.getuid?.() ?? -1,
        };
        sock.end(JSON.stringify(report) + '\n');
        sock.on('error', () => undefined);
      })
      .listen({ host, port, ipv6Only: false }, () => {
        if (++ready === ports.length) process.stdout.write('listening\n');
      });
  }
}

function dial(host: string, port: number, timeout: number): void {
  const chunks: Buffer[] = [];
  const sock = net.connect({ host, port, timeout });
  sock.on('data', (c: Buffer) => chunks.push(c));
  sock.on('end', () => process.stdout.write(Buffer.concat(chunks)));
  sock.on('timeout', () => {
    process.stderr.write('timeout\n');
    process.exit(3);
  });
  sock.on('error', (e) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  });
}

const [mode, host = '', a = '', b = ''] = process.argv.slice(2);
const list = (s: string): number[] => s.split(',').filter(Boolean).map(Number);
if (mode === 'serve') serve(host, list(a), list(b));
else if (mode === 'dial') dial(host, Number(a), Number(b || 5_000));
else {
  process.stderr.write('usage: capture-echo serve HOST PORT,... [OWN,...] | dial HOST PORT [TIMEOUT_MS]\n');
  process.exit(64);
}
