// A gRPC app for e2e tests: N unary calls, one after another (INTERVAL_MS apart), over ONE client
// channel, while one server-streaming call of STREAM_MESSAGES messages (500 ms apart) runs beside
// them. MODE "direct" dials the egress listener with :authority TARGET (prior-knowledge h2c);
// "connect" sets grpc_proxy to the egress listener and dials TARGET through CONNECT; "plain" dials
// TARGET itself (transparent capture).
// METADATA, a JSON object, is sent with every unary call.
// Prints a JSON summary on stdout. Bounded: N calls, each with a 10 s deadline.
// usage: node grpc-load.ts MODE EGRESS_PORT TARGET N INTERVAL_MS STREAM_MESSAGES [METADATA]
import { setTimeout as delay } from 'node:timers/promises';
import { grpc, testService, unary, type Msg, type TestClient } from './grpc.ts';

const [
  mode = 'direct',
  egress = '7400',
  target = '',
  nText = '0',
  intervalText = '0',
  streamText = '0',
  metadataText = '{}',
] = process.argv.slice(2);
const sent = Object.entries(JSON.parse(metadataText) as Record<string, string>);
const metadata = (): grpc.Metadata => {
  const md = new grpc.Metadata();
  for (const [k, v] of sent) md.set(k, v);
  return md;
};
const Client = grpc.makeGenericClientConstructor(testService, 'TestService');
let client: TestClient;
if (mode === 'connect') {
  process.env.grpc_proxy = `http://127.0.0.1:${egress}`;
  client = new Client(target, grpc.credentials.createInsecure()) as unknown as TestClient;
  delete process.env.grpc_proxy;
} else if (mode === 'plain') {
  // Transparent capture: the app dials the Service itself; iptables sends it to the sidecar.
  client = new Client(target, grpc.credentials.createInsecure(), {
    'grpc.enable_http_proxy': 0,
  }) as unknown as TestClient;
} else {
  client = new Client(`127.0.0.1:${egress}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': target,
    'grpc.enable_http_proxy': 0,
  }) as unknown as TestClient;
}

const stream = { messages: 0, status: -1, details: '' };
const streamDone =
  Number(streamText) > 0
    ? new Promise<void>((resolve) => {
        const s = client.serverStream({ text: 's', count: Number(streamText), intervalMs: 500 });
        s.on('data', () => stream.messages++);
        s.on('error', () => {});
        s.on('status', (st: grpc.StatusObject) => {
          stream.status = st.code;
          stream.details = st.details;
          resolve();
        });
      })
    : Promise.resolve();

const byServer: Record<string, number> = {};
/** x-forwarded-client-cert as the server saw it (echoed in its trailers), by value. */
const callers: Record<string, number> = {};
const failures: { at: number; code: number; details: string }[] = [];
const start = Date.now();
for (let i = 0; i < Number(nText); i++) {
  const r = await unary(client, { text: `c${i}` } satisfies Msg, metadata(), {
    deadline: Date.now() + 10_000,
  });
  if (r.error) failures.push({ at: Date.now() - start, code: r.error.code, details: r.error.details });
  else {
    const key = r.reply?.servedBy ?? '';
    byServer[key] = (byServer[key] ?? 0) + 1;
    const caller = String(r.trailers?.get('x-forwarded-client-cert')[0] ?? '');
    if (caller) callers[caller] = (callers[caller] ?? 0) + 1;
  }
  if (Number(intervalText) > 0) await delay(Number(intervalText));
}
await streamDone;
client.close();
process.stdout.write(
  JSON.stringify({
    total: Number(nText),
    failed: failures.length,
    failures: failures.slice(0, 10),
    byServer,
    callers,
    stream,
  }),
);
