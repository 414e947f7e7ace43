import { OutriggerError, type ErrorCode } from '../shared/errors.ts';

/**
 * The narrow port the reflector needs from the Kubernetes API: one list, one watch. The lean
 * node:https transport implements it for the sidecar; unit tests use a scripted fake.
 */
export interface ListResult {
  items: unknown[];
  resourceVersion: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  type: WatchEventType;
  object: unknown;
}

export interface KubeApi {
  list(path: string, query: Record<string, string>, signal: AbortSignal): Promise<ListResult>;
  /**
   * Streams events until the server ends the response (resolves) or something fails (rejects).
   * onOpen runs once the server has answered 200: the watch is established.
   */
  watch(
    path: string,
    query: Record<string, string>,
    handlers: { onOpen(): void; onEvent(e: WatchEvent): void },
    signal: AbortSignal,
  ): Promise<void>;
  /** A JSON merge patch (the gateway's Ingress status); optional: read-only users never write. */
  mergePatch?(path: string, patch: unknown, signal: AbortSignal): Promise<void>;
  /**
   * A server-side apply of an object by a field manager, without force (a field another manager
   * owns is a conflict, not taken over); resolves with the object the API answered.
   */
  apply?(path: string, object: unknown, fieldManager: string, signal: AbortSignal): Promise<unknown>;
}

/** A failed API call, with the HTTP status when there was one. */
export class KubeError extends OutriggerError {
  readonly status: number | undefined;
  /** The server's Retry-After (429 and 503 answers): how long it asked us to wait. */
  readonly retryAfterMs: number | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    status?: number,
    options?: { cause?: unknown; retryAfterMs?: number },
  ) {
    super(code, message, options);
    this.status = status;
    this.retryAfterMs = options?.retryAfterMs;
    this.name = 'KubeError';
  }
}

/** The longest Retry-After honoured: a bogus header must not park a reflector for hours. */
const MAX_RETRY_AFTER_S = 60;

/**
 * Retry-After in delay-seconds (what kube-apiserver sends with 429: "1"); the HTTP-date form and
 * anything unparsable are ignored (the caller's own backoff applies).
 */
export function parseRetryAfter(header: string | undefined): number | undefined {
  if (header === undefined || !/^\d+$/.test(header.trim())) return undefined;
  return Math.min(Number(header.trim()), MAX_RETRY_AFTER_S) * 1000;
}

export function errorForStatus(status: number, what: string, detail: string, retryAfter?: string): KubeError {
  const code: ErrorCode =
    status === 401
      ? 'kube_unauthorized'
      : status === 403
        ? 'kube_forbidden'
        : status === 410
          ? 'kube_gone'
          : status === 429 || status >= 500
            ? 'kube_unavailable'
            : 'kube_bad_response';
  const retryAfterMs = status === 429 || status === 503 ? parseRetryAfter(retryAfter) : undefined;
  return new KubeError(
    code,
    `${what}: HTTP ${status}${detail ? ` ${detail}` : ''}`,
    status,
    retryAfterMs === undefined ? undefined : { retryAfterMs },
  );
}

export const isGone = (e: unknown): boolean => e instanceof KubeError && e.code === 'kube_gone';
