import { OutriggerError, errorMessage } from '../shared/errors.ts';

/**
 * Talking to a sidecar's admin listener from the CLI (`status`, `version`). --admin takes a URL
 * or a bare HOST:PORT, as `kubectl port-forward` prints it.
 */
export { ADMIN_DEFAULT, ADMIN_HELP } from '../config/person-options.ts';

export function adminBase(raw: string): URL {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    url = new URL('invalid:');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new OutriggerError(
      'config_invalid',
      `invalid flag --admin=${JSON.stringify(raw)}: expected an http:// URL or HOST:PORT, e.g. 127.0.0.1:7402`,
    );
  return url;
}

/** GET one admin path; anything that is not an Outrigger admin answer is named as such. */
export async function adminGet(
  base: URL,
  path: string,
  as: 'json' | 'text',
): Promise<{ status: number; body: unknown }> {
  let res: Response;
  try {
    res = await fetch(new URL(path, base), { signal: AbortSignal.timeout(5_000) });
  } catch (e) {
    const cause = (e as { cause?: unknown }).cause;
    throw new OutriggerError(
      'kube_unavailable',
      `cannot reach the admin API at ${base.origin} (${errorMessage(cause ?? e)}); is the sidecar running, and is this its --admin-port?`,
    );
  }
  const text = await res.text();
  if (as === 'text') return { status: res.status, body: text };
  try {
    return { status: res.status, body: JSON.parse(text) as unknown };
  } catch {
    throw new OutriggerError(
      'kube_bad_response',
      `${base.origin}${path} answered ${res.status} with something that is not an Outrigger admin API (is ${base.port || 80} the --admin-port?)`,
    );
  }
}
