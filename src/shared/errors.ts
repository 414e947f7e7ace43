/**
 * Every error Outrigger raises on purpose carries a stable code. Codes are part of the public
 * surface (the x-outrigger-error header, logs, metrics labels), so never rename one.
 * The mapping of codes to HTTP statuses lives in exactly one place: src/proxy/status.ts.
 */
export type ErrorCode =
  | 'config_invalid'
  | 'identity_unavailable'
  | 'kube_unauthorized'
  | 'kube_forbidden'
  | 'kube_gone'
  | 'kube_unavailable'
  | 'kube_bad_response'
  | 'snapshot_invalid'
  | 'unknown_service'
  | 'no_discovery_data'
  | 'no_endpoints'
  | 'upstream_failed'
  | 'upstream_timeout'
  | 'egress_denied'
  | 'loop_detected'
  | 'misdirected'
  | 'bad_request'
  | 'headers_too_large'
  | 'request_timeout'
  | 'no_route'
  | 'route_backend_invalid'
  | 'admission_invalid'
  | 'source_invalid'
  | 'identity_request_invalid'
  | 'identity_token_rejected'
  | 'identity_forbidden'
  | 'identity_review_unavailable'
  | 'mesh_caller_denied';

export class OutriggerError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'OutriggerError';
  }
}

export function isOutriggerError(e: unknown, code?: ErrorCode): e is OutriggerError {
  return e instanceof OutriggerError && (code === undefined || e.code === code);
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
