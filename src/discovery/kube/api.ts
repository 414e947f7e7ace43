import { OutriggerError, type ErrorCode } from '../../shared/errors.ts';

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
}

/** A failed API call, with the HTTP status when there was one. */
export class KubeError extends OutriggerError {
  readonly status: number | undefined;

  constructor(code: ErrorCode, message: string, status?: number, options?: { cause?: unknown }) {
    super(code, message, options);
    this.status = status;
    this.name = 'KubeError';
  }
}

export function errorForStatus(status: number, what: string, detail: string): KubeError {
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
  return new KubeError(code, `${what}: HTTP ${status}${detail ? ` ${detail}` : ''}`, status);
}

export const isGone = (e: unknown): boolean => e instanceof KubeError && e.code === 'kube_gone';
