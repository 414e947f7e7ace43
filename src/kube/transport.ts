import type { Readable } from 'node:stream';
import { errorMessage } from '../shared/errors.ts';
import { errorForStatus, KubeError, type KubeApi, type ListResult, type WatchEvent } from './api.ts';
import type { KubeConnection } from './connection.ts';
import { http1Sender, http2Sender, type RawResponse, type SendBody, type Sender } from './senders.ts';

export interface TransportStats {
  lists: number;
  watches: number;
  failures: number;
  unauthorizedRetries: number;
  openWatches: number;
}

export interface KubeTransport extends KubeApi {
  readonly stats: TransportStats;
  mergePatch(path: string, patch: unknown, signal: AbortSignal): Promise<void>;
  apply(path: string, object: unknown, fieldManager: string, signal: AbortSignal): Promise<unknown>;
  close(): void;
}

const MAX_LIST_BYTES = 256 * 1024 * 1024;

/**
 * A lean list/watch client over node:http2 or node:https (see senders.ts): the bearer token read
 * per request, the CA from the connection, connections reused across lists and re-watches. It
 * replaces @kubernetes/client-node at run time because that package's entry point costs ~60 MB RSS
 * per sidecar. After a 401 it refreshes the credentials and retries once.
 */
export function createTransport(conn: KubeConnection, opts: { protocol?: 'h1' | 'h2' } = {}): KubeTransport {
  const sender: Sender = opts.protocol === 'h2' ? http2Sender(conn) : http1Sender(conn);
  const stats: TransportStats = { lists: 0, watches: 0, failures: 0, unauthorizedRetries: 0, openWatches: 0 };

  const open = (
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
    body?: SendBody,
  ): Promise<RawResponse> => {
    const url = new URL(path, conn.server);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'outrigger/0.1' };
    if (body) headers['content-type'] = body.contentType ?? 'application/merge-patch+json';
    const auth = conn.authorization();
    if (auth) headers.authorization = auth;
    return sender.send(url, headers, signal, body);
  };

  const openAuthed = async (
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
    payload?: SendBody,
  ): Promise<RawResponse> => {
    let res = await open(path, query, signal, payload);
    if (res.status === 401) {
      // Drain the 401 first (its body must be read before anything else can miss its end), then
      // re-read the token, which the kubelet may have rotated, and retry once if it changed.
      const body = await readBody(res.body, 4096).catch(() => '');
      if (!(await conn.unauthorized())) throw errorForStatus(401, path, statusMessage(body));
      stats.unauthorizedRetries++;
      res = await open(path, query, signal, payload);
    }
    // 201: a server-side apply that created its object.
    if (res.status !== 200 && res.status !== 201) {
      const body = await readBody(res.body, 4096).catch(() => '');
      throw errorForStatus(res.status, path, statusMessage(body), res.retryAfter);
    }
    return res;
  };

  const wrap = (e: unknown, path: string): unknown => {
    stats.failures++;
    if (e instanceof KubeError || (e instanceof Error && e.name === 'AbortError')) return e;
    return new KubeError('kube_unavailable', `${path}: ${errorMessage(e)}`, undefined, { cause: e });
  };

  return {
    stats,
    async list(path, query, signal): Promise<ListResult> {
      stats.lists++;
      try {
        const res = await openAuthed(path, query, signal);
        const text = await readBody(res.body, MAX_LIST_BYTES);
        let parsed: { items?: unknown; metadata?: { resourceVersion?: unknown } };
        try {
          parsed = JSON.parse(text) as typeof parsed;
        } catch {
          throw new KubeError('kube_bad_response', `${path}: list response is not JSON`);
        }
        if (!Array.isArray(parsed.items))
          throw new KubeError('kube_bad_response', `${path}: list without items`);
        return {
          items: parsed.items as unknown[],
          resourceVersion:
            typeof parsed.metadata?.resourceVersion === 'string' ? parsed.metadata.resourceVersion : '',
        };
      } catch (e) {
        throw wrap(e, path);
      }
    },
    async watch(path, query, handlers, signal): Promise<void> {
      stats.watches++;
      let res: RawResponse;
      try {
        res = await openAuthed(path, { ...query, watch: '1' }, signal);
      } catch (e) {
        throw wrap(e, path);
      }
      stats.openWatches++;
      handlers.onOpen();
      try {
        await streamLines(res.body, (line) => {
          let ev: WatchEvent;
          try {
            ev = JSON.parse(line) as WatchEvent;
          } catch {
            // A torn stream must not be half-applied: fail the watch, the reflector resumes it.
            throw new KubeError('kube_bad_response', `${path}: watch event is not JSON`);
          }
          handlers.onEvent(ev);
        });
      } catch (e) {
        throw wrap(e, path);
      } finally {
        stats.openWatches--;
      }
    },
    async mergePatch(path, patch, signal): Promise<void> {
      try {
        const res = await openAuthed(path, {}, signal, { method: 'PATCH', data: JSON.stringify(patch) });
        await readBody(res.body, 1024 * 1024);
      } catch (e) {
        throw wrap(e, path);
      }
    },
    async apply(path, object, fieldManager, signal): Promise<unknown> {
      try {
        const query = { fieldManager };
        // JSON is YAML: the apply media type takes it as it is.
        const data = JSON.stringify(object);
        const res = await openAuthed(path, query, signal, {
          method: 'PATCH',
          data,
          contentType: 'application/apply-patch+yaml',
        });
        return JSON.parse(await readBody(res.body, 1024 * 1024)) as unknown;
      } catch (e) {
        throw wrap(e, path);
      }
    },
    close(): void {
      sender.close();
    },
  };
}

/** The message of a Kubernetes Status body, bounded for error texts. */
export function statusMessage(body: string): string {
  try {
    const s = JSON.parse(body) as { message?: unknown };
    return typeof s.message === 'string' ? s.message.slice(0, 300) : '';
  } catch {
    return body.slice(0, 200);
  }
}

/** Whether a body ended as a complete response (an HTTP/1.1 IncomingMessage knows; HTTP/2 ends cleanly). */
const completed = (res: Readable): boolean => (res as Readable & { complete?: boolean }).complete ?? true;

function readBody(res: Readable, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    // A body that already ended or died emits nothing more: waiting for it would hang forever.
    if (res.readableEnded || res.destroyed) {
      reject(new Error('response body already consumed'));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        res.destroy(new KubeError('kube_bad_response', `response larger than ${limit} bytes`));
        return;
      }
      chunks.push(c);
    });
    res.on('end', () =>
      completed(res)
        ? resolve(Buffer.concat(chunks).toString('utf8'))
        : reject(new Error('response cut off')),
    );
    res.on('error', reject);
    res.on('close', () => reject(new Error('response closed early')));
  });
}

/** Newline-delimited JSON events; resolves when the server ends the stream cleanly. */
function streamLines(res: Readable, onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
    let ended = false;
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      try {
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line) onLine(line);
        }
      } catch (e) {
        res.destroy();
        reject(e instanceof Error ? e : new Error(String(e)));
      }
    });
    res.on('end', () => {
      ended = true;
      if (completed(res)) resolve();
      else reject(new Error('watch stream cut off'));
    });
    res.on('error', reject);
    res.on('close', () => {
      if (!ended) reject(new Error('watch stream closed early'));
    });
  });
}
