import { createRequire } from 'node:module';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type protobuf from 'protobufjs';

/**
 * The test gRPC service of proto/outrigger/v1/test_service.proto on real @grpc/grpc-js servers and
 * clients, messages encoded with protobufjs from the same file.
 */
export interface Msg {
  text?: string;
  count?: number;
  intervalMs?: number;
  port?: number;
  failCode?: number;
  delayMs?: number;
  servedBy?: string;
}

const pb = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
const MsgType = pb
  .loadSync(join(import.meta.dirname, '../../proto/outrigger/v1/test_service.proto'))
  .lookupType('outrigger.v1.Msg');

const serialize = (m: Msg): Buffer => Buffer.from(MsgType.encode(MsgType.fromObject(m)).finish());
const deserialize = (b: Buffer): Msg => MsgType.toObject(MsgType.decode(b));

const method = (name: string, requestStream: boolean, responseStream: boolean) => ({
  path: `/outrigger.v1.TestService/${name}`,
  requestStream,
  responseStream,
  requestSerialize: serialize,
  requestDeserialize: deserialize,
  responseSerialize: serialize,
  responseDeserialize: deserialize,
  originalName: name,
});

export const testService = {
  unary: method('Unary', false, false),
  serverStream: method('ServerStream', false, true),
  clientStream: method('ClientStream', true, false),
  bidi: method('Bidi', true, true),
} satisfies grpc.ServiceDefinition;

export interface GrpcBackend {
  port: number;
  calls: number;
  close(): Promise<void>;
}

/** A TestService server (127.0.0.1, a free port by default); replies carry its port, trailers echo metadata (x-echo-bin, x-forwarded-client-cert). */
export async function startGrpcBackend(
  address = '127.0.0.1:0',
  credentials = grpc.ServerCredentials.createInsecure(),
): Promise<GrpcBackend> {
  const server = new grpc.Server();
  const state = { port: 0, calls: 0, address };
  const trailersFrom = (md: grpc.Metadata): grpc.Metadata => {
    const t = new grpc.Metadata();
    const bin = md.get('x-echo-bin');
    if (bin[0]) t.set('x-echo-bin', bin[0]);
    // The caller identity a meshed sidecar vouched for.
    const caller = md.get('x-forwarded-client-cert');
    if (caller[0]) t.set('x-forwarded-client-cert', caller[0]);
    t.set('x-port', String(state.port));
    return t;
  };
  server.addService(testService, {
    unary: (call: grpc.ServerUnaryCall<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) => {
      state.calls++;
      const r = call.request;
      const answer = (): void => {
        if (r.failCode)
          return cb({
            code: r.failCode,
            details: `failed as asked: ${r.text ?? ''}`,
            metadata: trailersFrom(call.metadata),
          });
        cb(
          null,
          { text: r.text ?? '', port: state.port, servedBy: state.address },
          trailersFrom(call.metadata),
        );
      };
      if (r.delayMs) setTimeout(answer, r.delayMs);
      else answer();
    },
    serverStream: (call: grpc.ServerWritableStream<Msg, Msg>) => {
      state.calls++;
      const { count = 0, intervalMs = 0, text = '' } = call.request;
      let i = 0;
      const next = (): void => {
        if (call.cancelled) return;
        if (i >= count) return void call.end(trailersFrom(call.metadata));
        call.write({ text: `${text}${i}`, count: i, port: state.port, servedBy: state.address });
        i++;
        setTimeout(next, intervalMs);
      };
      next();
    },
    clientStream: (call: grpc.ServerReadableStream<Msg, Msg>, cb: grpc.sendUnaryData<Msg>) => {
      state.calls++;
      let text = '';
      let count = 0;
      call.on('data', (m: Msg) => {
        text += m.text ?? '';
        count++;
      });
      call.on('end', () => cb(null, { text, count, port: state.port }, trailersFrom(call.metadata)));
    },
    bidi: (call: grpc.ServerDuplexStream<Msg, Msg>) => {
      state.calls++;
      call.on('data', (m: Msg) => call.write({ text: m.text ?? '', port: state.port }));
      call.on('end', () => call.end(trailersFrom(call.metadata)));
    },
  });
  state.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, credentials, (e, port) => (e ? reject(e) : resolve(port))),
  );
  state.address = address.replace(/:0$/, `:${state.port}`);
  return {
    get port() {
      return state.port;
    },
    get calls() {
      return state.calls;
    },
    // Graceful: GOAWAY to every client, calls in flight finish, then the server closes.
    close: () => new Promise((r) => server.tryShutdown(() => r())),
  };
}

export type TestClient = grpc.Client & {
  unary(
    m: Msg,
    md: grpc.Metadata,
    opts: grpc.CallOptions,
    cb: grpc.requestCallback<Msg>,
  ): grpc.ClientUnaryCall;
  serverStream(m: Msg, md?: grpc.Metadata, opts?: grpc.CallOptions): grpc.ClientReadableStream<Msg>;
  clientStream(
    md: grpc.Metadata,
    opts: grpc.CallOptions,
    cb: grpc.requestCallback<Msg>,
  ): grpc.ClientWritableStream<Msg>;
  bidi(md?: grpc.Metadata, opts?: grpc.CallOptions): grpc.ClientDuplexStream<Msg, Msg>;
};

const Client = grpc.makeGenericClientConstructor(testService, 'TestService');

/**
 * A client whose one channel goes to the sidecar's egress port with :authority naming the Service
 * (prior-knowledge h2c to the listener, as an app with the listener as its target would).
 */
export function clientVia(port: number, authority: string): TestClient {
  return new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.default_authority': authority,
    'grpc.enable_http_proxy': 0,
  }) as unknown as TestClient;
}

export interface UnaryResult {
  error?: grpc.ServiceError;
  reply?: Msg;
  trailers?: grpc.Metadata;
}

export function unary(
  client: TestClient,
  m: Msg,
  md = new grpc.Metadata(),
  opts: grpc.CallOptions = {},
): Promise<UnaryResult> {
  return new Promise((resolve) => {
    let trailers: grpc.Metadata | undefined;
    const call = client.unary(m, md, opts, (error, reply) =>
      // The status event (with trailers) follows the callback on the same tick.
      setImmediate(() =>
        resolve({
          ...(error ? { error } : {}),
          ...(reply ? { reply } : {}),
          ...(trailers ? { trailers } : {}),
        }),
      ),
    );
    call.on('status', (s: grpc.StatusObject) => (trailers = s.metadata));
  });
}

export { grpc };
