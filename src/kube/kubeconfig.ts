import type { RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { KubeConnection } from './connection.ts';

/**
 * A connection from a kubeconfig, for `outrigger resolve` and out-of-cluster runs. This is the only
 * place the sidecar path may load @kubernetes/client-node (kubeconfig merging, exec and OIDC auth
 * providers are worth its weight on a laptop), and it is imported dynamically so an in-cluster
 * sidecar never pays the ~60 MB it costs.
 */
export async function kubeconfigConnection(
  path: string,
): Promise<KubeConnection & { namespace: string | undefined }> {
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(path);
  } catch (e) {
    // A file that cannot be read is a runtime failure (exit 1); one that does not parse is invalid input (2).
    const unreadable = typeof (e as { code?: unknown }).code === 'string';
    throw new OutriggerError(
      unreadable ? 'source_invalid' : 'config_invalid',
      `--kubeconfig ${path}: ${errorMessage(e)}`,
    );
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new OutriggerError('config_invalid', `kubeconfig ${path}: ${noCluster(kc)}`);
  if (cluster.server.startsWith('http:') && !cluster.skipTLSVerify)
    throw new OutriggerError(
      'config_invalid',
      `kubeconfig ${path}: cluster "${cluster.name}" has the plain-HTTP server ${cluster.server}; ` +
        'use its https:// URL, or set insecure-skip-tls-verify: true on the cluster if it really serves plain HTTP',
    );
  const header = async (): Promise<{ opts: RequestOptions; auth: string | undefined }> => {
    const opts: RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    const h = (opts.headers ?? {}) as Record<string, unknown>;
    const auth = h.Authorization ?? h.authorization;
    return { opts, auth: typeof auth === 'string' ? auth : undefined };
  };
  let first: Awaited<ReturnType<typeof header>>;
  try {
    first = await header();
  } catch (e) {
    // Credential plugins (exec, OIDC) fail here: name the user entry whose credentials failed.
    const user = kc.getCurrentUser()?.name ?? '(none)';
    throw new OutriggerError(
      'kube_unauthorized',
      `kubeconfig ${path}: cannot get credentials of user "${user}": ${errorMessage(e)}`,
    );
  }
  let auth = first.auth;
  const ctx = kc.getContextObject(kc.getCurrentContext());
  return {
    server: new URL(cluster.server),
    ...(first.opts.ca ? { ca: first.opts.ca as string | Buffer } : {}),
    ...(first.opts.cert ? { cert: first.opts.cert as string | Buffer } : {}),
    ...(first.opts.key ? { key: first.opts.key as string | Buffer } : {}),
    ...(cluster.skipTLSVerify ? { rejectUnauthorized: false } : {}),
    namespace: ctx?.namespace,
    authorization: () => auth,
    unauthorized: async () => {
      const next = (await header()).auth;
      const changed = next !== auth;
      auth = next;
      return changed;
    },
  };
}

/** Why there is no current cluster, with the contexts that do exist. */
function noCluster(kc: KubeConfig): string {
  const current = kc.getCurrentContext();
  const contexts = kc.getContexts().map((c) => c.name);
  const have = contexts.length > 0 ? contexts.join(', ') : 'none';
  if (!current) return `no current-context is set; contexts: ${have} (kubectl config use-context NAME)`;
  const ctx = kc.getContextObject(current);
  if (!ctx)
    return `current-context "${current}" is not defined in the file; contexts: ${have} (kubectl config use-context NAME)`;
  return `context "${current}" names cluster "${ctx.cluster}", which is not defined in the file`;
}
