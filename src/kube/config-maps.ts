import { errorMessage } from '../shared/errors.ts';
import { errorForStatus, KubeError } from './api.ts';
import type { KubeConnection } from './connection.ts';
import { jsonClient } from './json-client.ts';
import { createTransport, statusMessage } from './transport.ts';

/** One ConfigMap as the trust-bundle distribution reads it. */
export interface NamedConfigMap {
  namespace: string;
  labels: Record<string, string>;
  data: Record<string, string>;
}

interface ObjectMeta {
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
  };
  data?: Record<string, string>;
}

/**
 * The calls `outrigger identity` makes to keep a ConfigMap of one name in many namespaces, and
 * nothing more (RBAC: namespaces list/watch; configmaps list/patch of that name, create):
 * namespaces by label selector, the ConfigMaps of that name in every namespace (one list with a
 * field selector, which RBAC's resourceNames can restrict), create, merge patch.
 */
export function configMapsApi(conn: KubeConnection) {
  const transport = createTransport(conn);
  const client = jsonClient(conn, 1024 * 1024);
  const create = async (namespace: string, configMap: object, signal: AbortSignal) => {
    const path = `/api/v1/namespaces/${namespace}/configmaps`;
    let res;
    try {
      res = await client.send('POST', path, configMap, signal);
    } catch (e) {
      throw new KubeError('kube_unavailable', `${path}: ${errorMessage(e)}`, undefined, { cause: e });
    }
    if (res.status === 201) return 'ok' as const;
    // Someone else created it first (another issuer replica, or a user): read again next round.
    if (res.status === 409) return 'conflict' as const;
    throw errorForStatus(res.status, path, statusMessage(res.text));
  };
  return {
    async namespaces(labelSelector: string, signal: AbortSignal): Promise<string[]> {
      const list = await transport.list('/api/v1/namespaces', { labelSelector }, signal);
      return (list.items as ObjectMeta[]).flatMap((n) => (n.metadata?.name ? [n.metadata.name] : []));
    },
    async named(name: string, signal: AbortSignal): Promise<NamedConfigMap[]> {
      const list = await transport.list(
        '/api/v1/configmaps',
        { fieldSelector: `metadata.name=${name}` },
        signal,
      );
      return (list.items as ObjectMeta[]).flatMap(({ metadata: m, data }) =>
        m?.namespace && m.name === name
          ? [
              {
                namespace: m.namespace,
                labels: m.labels ?? {},
                data: data ?? {},
              },
            ]
          : [],
      );
    },
    create,
    mergePatch: (path: string, patch: unknown, signal: AbortSignal) =>
      transport.mergePatch(path, patch, signal),
    /** Calls onChange for every namespace event until the watch ends (resolves) or fails (rejects). */
    watchNamespaces: (labelSelector: string, onChange: () => void, signal: AbortSignal): Promise<void> =>
      transport.watch(
        '/api/v1/namespaces',
        { labelSelector, allowWatchBookmarks: 'true' },
        { onOpen: () => {}, onEvent: (e) => e.type !== 'BOOKMARK' && onChange() },
        signal,
      ),
    close(): void {
      transport.close();
      client.close();
    },
  };
}
