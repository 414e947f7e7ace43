import { connect, type IncomingHttpHeaders, type IncomingHttpStatusHeader } from 'node:http2';
import { systemClock, type Clock } from '../shared/clock.ts';

/** A replayed probe's verdict; a failure says why in a few words (the admin port's body). */
export interface ProbeOutcome {
  ok: boolean;
  reason: string;
}

const CHECK_PATH = '/grpc.health.v1.Health/Check';
/** grpc.health.v1.HealthCheckResponse.ServingStatus, by number. */
const STATUS_NAMES = ['UNKNOWN', 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'];
const SERVING = 1;

/**
 * Kubelet's gRPC probe, replayed from inside the pod: the standard health check
 * (`grpc.health.v1.Health/Check`, prior-knowledge h2c, as kubelet dials it) for `service`. It passes
 * when the answer is SERVING with grpc-status 0; any other status, a non-zero grpc-status, a
 * connect error or no answer within timeoutMs fails it.
 */
export function grpcHealthCheck(
  host: string,
  port: number,
  service: string,
  timeoutMs: number,
  clock: Clock = systemClock,
): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    const authority = host.includes(':') ? `http://[${host}]:${port}` : `http://${host}:${port}`;
    const session = connect(authority);
    let settled = false;
    const settle = (ok: boolean, reason: string): void => {
      if (settled) return;
      settled = true;
      timer.cancel();
      session.destroy();
      resolve({ ok, reason });
    };
    const timer = clock.setTimer(timeoutMs, () => settle(false, `no answer within ${timeoutMs} ms`));
    session.on('error', (e: NodeJS.ErrnoException) =>
      settle(false, `connect failed: ${e.code ?? e.message}`),
    );
    // The stream opens once connected, so a refused connect is reported as one.
    session.once('connect', () => {
      const stream = session.request({
        ':method': 'POST',
        ':path': CHECK_PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': `${timeoutMs}m`,
        'user-agent': 'kube-probe/outrigger',
      });
      const chunks: Buffer[] = [];
      let headers: Answer = {};
      stream.on('response', (h) => (headers = h));
      stream.on('data', (d: Buffer) => chunks.push(d));
      stream.on('trailers', (trailers: IncomingHttpHeaders) => (headers = { ...headers, ...trailers }));
      stream.on('error', (e: NodeJS.ErrnoException) =>
        settle(false, `stream failed: ${e.code ?? e.message}`),
      );
      stream.on('close', () => {
        const verdict = judge(headers, Buffer.concat(chunks));
        settle(verdict.ok, verdict.reason);
      });
      stream.end(encodeHealthCheckRequest(service));
    });
  });
}

type Answer = IncomingHttpHeaders & IncomingHttpStatusHeader;

function judge(headers: Answer, body: Buffer): ProbeOutcome {
  if (headers[':status'] !== 200) return { ok: false, reason: `HTTP status ${headers[':status'] ?? 'none'}` };
  const grpcStatus = headers['grpc-status'];
  if (grpcStatus === undefined) return { ok: false, reason: 'no grpc-status' };
  if (grpcStatus !== '0') {
    const message = headers['grpc-message'];
    return {
      ok: false,
      reason: `grpc-status ${String(grpcStatus)}${message ? ` (${percentDecoded(String(message))})` : ''}`,
    };
  }
  const status = decodeHealthStatus(body);
  if (status === undefined) return { ok: false, reason: 'malformed HealthCheckResponse' };
  const name = STATUS_NAMES[status] ?? String(status);
  return status === SERVING ? { ok: true, reason: name } : { ok: false, reason: `status ${name}` };
}

/** A length-prefixed gRPC message holding HealthCheckRequest { string service = 1; }. */
export function encodeHealthCheckRequest(service: string): Buffer {
  const name = Buffer.from(service, 'utf8');
  const message = name.length === 0 ? name : Buffer.concat([Buffer.from([0x0a]), varint(name.length), name]);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

/**
 * The status (field 1, an enum) of the length-prefixed HealthCheckResponse in a response body; 0
 * (UNKNOWN) when the field is absent, proto3's default. Undefined for a body that is not one
 * uncompressed message (the request advertises no compression).
 */
export function decodeHealthStatus(body: Buffer): number | undefined {
  if (body.length < 5 || body[0] !== 0) return undefined;
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) return undefined;
  let status = 0;
  let at = 5;
  while (at < body.length) {
    const tag = readVarint(body, at);
    if (!tag) return undefined;
    at = tag.next;
    const field = Math.floor(tag.value / 8);
    const wireType = tag.value % 8;
    if (wireType === 0) {
      const v = readVarint(body, at);
      if (!v) return undefined;
      if (field === 1) status = v.value;
      at = v.next;
    } else if (wireType === 2) {
      const len = readVarint(body, at);
      if (!len) return undefined;
      at = len.next + len.value;
    } else if (wireType === 1 || wireType === 5) at += wireType === 1 ? 8 : 4;
    else return undefined;
  }
  return at === body.length ? status : undefined;
}

/** grpc-message is percent-encoded; a malformed one is shown as sent. */
function percentDecoded(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  bytes.push(n);
  return Buffer.from(bytes);
}

/** Up to 7 bytes (49 bits): more than any length or enum in this message needs. */
function readVarint(buf: Buffer, at: number): { value: number; next: number } | undefined {
  let value = 0;
  for (let i = 0; i < 7 && at + i < buf.length; i++) {
    const b = buf[at + i] as number;
    value += (b & 0x7f) * 2 ** (7 * i);
    if (b < 0x80) return { value, next: at + i + 1 };
  }
  return undefined;
}
