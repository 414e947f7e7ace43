// A TCP relay for e2e tests, run inside a pod namespace: what a packet capture of one direction
// would see. Every connection accepted on LISTEN_PORT is relayed to TARGET_HOST:TARGET_PORT, and
// the bytes the client sent are appended to OUT_DIR/<n>.bin (one file per connection).
// usage: node wire-tap.ts LISTEN_PORT TARGET_HOST TARGET_PORT OUT_DIR
import { appendFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const [listen = '0', host = '', port = '0', out = ''] = process.argv.slice(2);
let n = 0;
net
  .createServer((client) => {
    const file = path.join(out, `${n++}.bin`);
    const upstream = net.connect({ host, port: Number(port) });
    for (const s of [client, upstream]) s.on('error', () => (s === client ? upstream : client).destroy());
    client.on('data', (d: Buffer) => appendFileSync(file, d));
    client.pipe(upstream).pipe(client);
  })
  .listen(Number(listen), '127.0.0.1', () => process.stdout.write('listening\n'));
