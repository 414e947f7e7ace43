import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { errorMessage } from '../../shared/errors.ts';
import { errorForStatus, KubeError, type KubeApi, type ListResult, type WatchEvent } from './api.ts';
import type { KubeConnection } from './connection.ts';

export interface TransportStats {
  lists: number;
  watches: number;
  failures: number;
  unauthorizedRetries: number;
  openWatches: number;
}

export interface KubeTransport extends KubeApi {
  readonly stats: TransportStats;
  close(): void;
}

const MAX_LIST_BYTES = 256 * 1024 * 1024;

/**
 * A lean list/watch client over node:https: a keep-alive agent (one TLS handshake per
 * connection, reused across lists and re-watches), the bearer token read per request, the CA from
 * the connection. It replaces @kubernetes/client-node at run time because that package's entry point
 * costs ~60 MB RSS per sidecar (issue 3). After a 401 it refreshes the credentials and retries once.
 */
export function createTransport(conn: KubeConnection): KubeTransport {
  const secure = conn.server.protocol === 'https:';
  const agentOpts = { keepAlive: true, keepAliveMsecs: 30_000, maxFreeSockets: 4 };
  const agent = secure
    ? new HttpsAgent({
        ...agentOpts,
        ca: conn.ca,
        cert: conn.cert,
        key: conn.key,
        ...(conn.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
      })
    : new HttpAgent(agentOpts);
  const stats: TransportStats = { lists: 0, watches: 0, failures: 0, unauthorizedRetries: 0, openWatches: 0 };

  const open = (path: string, query: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const url = new URL(path, conn.server);
      for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
      const headers: Record<string, string> = { accept: 'application/json', 'user-agent': 'outrigger/0.1' };
      const auth = conn.authorization();
      if (auth) headers.authorization = auth;
      const req = (secure ? httpsRequest : httpRequest)(url, { agent, headers, signal }, resolve);
      req.on('error', reject);
      req.end();
    });

  const openAuthed = async (
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
  ): Promise<IncomingMessage> => {
    let res = await open(path, query, signal);
    if (res.statusCode === 401) {
      res.resume();
      // The kubelet may have rotated the token, or an old one was invalidated: re-read, retry once.
      if (await conn.unauthorized()) {
        stats.unauthorizedRetries++;
        res = await open(path, query, signal);
      }
    }
    if (res.statusCode !== 200) {
      const body = await readBody(res, 4096).catch(() => '');
      throw errorForStatus(res.statusCode ?? 0, `${path}`, statusMessage(body));
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
        const text = await readBody(res, MAX_LIST_BYTES);
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
      let res: IncomingMessage;
      try {
        res = await openAuthed(path, { ...query, watch: '1' }, signal);
      } catch (e) {
        throw wrap(e, path);
      }
      stats.openWatches++;
      handlers.onOpen();
      try {
        await streamLines(res, (line) => {
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
    close(): void {
      agent.destroy();
    },
  };
}

function statusMessage(body: string): string {
  try {
    const s = JSON.parse(body) as { message?: unknown };
    return typeof s.message === 'string' ? s.message.slice(0, 300) : '';
  } catch {
    return body.slice(0, 200);
  }
}

function readBody(res: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
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
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

/** Newline-delimited JSON events; resolves when the server ends the stream cleanly. */
function streamLines(res: IncomingMessage, onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buf = '';
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
    res.on('end', () => (res.complete ? resolve() : reject(new Error('watch stream cut off'))));
    res.on('error', reject);
    res.on('close', () => {
      if (!res.complete) reject(new Error('watch stream closed early'));
    });
  });
}
