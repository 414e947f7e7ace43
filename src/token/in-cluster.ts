import { OutriggerError } from '../shared/errors.ts';

/**
 * The API server address inside a pod, from the variables the kubelet sets. Both are required:
 * client-node would build https://undefined:undefined, and its loadFromDefault would fall back to
 * http://localhost:8080. Neither is acceptable for a sidecar, so a missing one is an error that
 * names it (no silent fallback).
 */
export function inClusterServer(env: Record<string, string | undefined>): URL {
  const host = env.KUBERNETES_SERVICE_HOST?.trim();
  const port = env.KUBERNETES_SERVICE_PORT?.trim();
  const missing = [!host && 'KUBERNETES_SERVICE_HOST', !port && 'KUBERNETES_SERVICE_PORT'].filter(Boolean);
  if (!host || !port) {
    throw new OutriggerError(
      'config_invalid',
      `in-cluster mode needs ${missing.join(' and ')} (set by the kubelet in a pod); outside a pod pass --kubeconfig`,
    );
  }
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw new OutriggerError(
      'config_invalid',
      `KUBERNETES_SERVICE_PORT=${JSON.stringify(port)}: allowed is a port 1-65535`,
    );
  }
  const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return new URL(`https://${h}:${port}`);
}
