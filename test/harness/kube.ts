import https from 'node:https';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from './tools.ts';

export class KubeError extends Error {
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, message: string, body: unknown) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

type Obj = Record<string, unknown> & {
  metadata?: { name?: string; namespace?: string; [k: string]: unknown };
};

/** Where each kind lives in the REST API; only the kinds the tests create. */
const resources: Record<string, { prefix: string; plural: string; namespaced: boolean }> = {
  Namespace: { prefix: '/api/v1', plural: 'namespaces', namespaced: false },
  Node: { prefix: '/api/v1', plural: 'nodes', namespaced: false },
  ServiceAccount: { prefix: '/api/v1', plural: 'serviceaccounts', namespaced: true },
  Service: { prefix: '/api/v1', plural: 'services', namespaced: true },
  Secret: { prefix: '/api/v1', plural: 'secrets', namespaced: true },
  ConfigMap: { prefix: '/api/v1', plural: 'configmaps', namespaced: true },
  Pod: { prefix: '/api/v1', plural: 'pods', namespaced: true },
  EndpointSlice: { prefix: '/apis/discovery.k8s.io/v1', plural: 'endpointslices', namespaced: true },
  ClusterRole: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'clusterroles', namespaced: false },
  ClusterRoleBinding: {
    prefix: '/apis/rbac.authorization.k8s.io/v1',
    plural: 'clusterrolebindings',
    namespaced: false,
  },
  Role: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'roles', namespaced: true },
  RoleBinding: { prefix: '/apis/rbac.authorization.k8s.io/v1', plural: 'rolebindings', namespaced: true },
  Deployment: { prefix: '/apis/apps/v1', plural: 'deployments', namespaced: true },
  IngressClass: { prefix: '/apis/networking.k8s.io/v1', plural: 'ingressclasses', namespaced: false },
  Ingress: { prefix: '/apis/networking.k8s.io/v1', plural: 'ingresses', namespaced: true },
  CustomResourceDefinition: {
    prefix: '/apis/apiextensions.k8s.io/v1',
    plural: 'customresourcedefinitions',
    namespaced: false,
  },
  GatewayClass: { prefix: '/apis/gateway.networking.k8s.io/v1', plural: 'gatewayclasses', namespaced: false },
  Gateway: { prefix: '/apis/gateway.networking.k8s.io/v1', plural: 'gateways', namespaced: true },
  HTTPRoute: { prefix: '/apis/gateway.networking.k8s.io/v1', plural: 'httproutes', namespaced: true },
  GRPCRoute: { prefix: '/apis/gateway.networking.k8s.io/v1', plural: 'grpcroutes', namespaced: true },
  ReferenceGrant: {
    prefix: '/apis/gateway.networking.k8s.io/v1',
    plural: 'referencegrants',
    namespaced: true,
  },
  MutatingWebhookConfiguration: {
    prefix: '/apis/admissionregistration.k8s.io/v1',
    plural: 'mutatingwebhookconfigurations',
    namespaced: false,
  },
};

export function collectionPath(kind: string, namespace?: string): string {
  const r = resources[kind];
  if (!r) throw new Error(`KubeAdmin does not know kind ${kind}`);
  return r.namespaced
    ? `${r.prefix}/namespaces/${namespace ?? 'default'}/${r.plural}`
    : `${r.prefix}/${r.plural}`;
}

/** A small admin client for test set-up: plain node:https with the cluster CA and a bearer token. */
export class KubeAdmin {
  readonly server: string;
  readonly #ca: string;
  readonly #token: string;
  readonly #agent: https.Agent;

  constructor(server: string, caPem: string, token: string) {
    this.server = server;
    this.#ca = caPem;
    this.#token = token;
    this.#agent = new https.Agent({ ca: caPem, keepAlive: false });
  }

  /** As another identity (for example a service-account token). */
  as(token: string): KubeAdmin {
    return new KubeAdmin(this.server, this.#ca, token);
  }

  request<T = Obj>(
    method: string,
    urlPath: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    const url = new URL(urlPath, this.server);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        url,
        {
          method,
          agent: this.#agent,
          headers: {
            authorization: `Bearer ${this.#token}`,
            accept: 'application/json',
            ...(payload ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) } : {}),
          },
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = text ? JSON.parse(text) : {};
            } catch {
              /* keep text */
            }
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve(parsed as T);
            else
              reject(
                new KubeError(status, `${method} ${urlPath}: HTTP ${status}: ${text.slice(0, 300)}`, parsed),
              );
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath}: timed out`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** Creates an object; the kind decides the path. */
  apply<T = Obj>(obj: Obj, query = ''): Promise<T> {
    const kind = obj.kind as string;
    return this.request<T>('POST', collectionPath(kind, obj.metadata?.namespace) + query, obj);
  }

  /** Server-side apply style replace-or-create is not needed by tests; delete is. */
  delete(kind: string, name: string, namespace?: string): Promise<unknown> {
    return this.request('DELETE', `${collectionPath(kind, namespace)}/${name}`);
  }

  /** JSON merge patch. */
  patch<T = Obj>(kind: string, name: string, namespace: string | undefined, patch: unknown): Promise<T> {
    return this.request<T>(
      'PATCH',
      `${collectionPath(kind, namespace)}/${name}`,
      patch,
      'application/merge-patch+json',
    );
  }

  get<T = Obj>(kind: string, name: string, namespace?: string): Promise<T> {
    return this.request<T>('GET', `${collectionPath(kind, namespace)}/${name}`);
  }

  /** A fresh namespace per test: without a namespace controller they can never be fully deleted. */
  async createNamespace(prefix = 'test', labels: Record<string, string> = {}): Promise<string> {
    const name = `${prefix}-${randomBytes(4).toString('hex')}`;
    await this.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
    return name;
  }

  async createServiceAccount(namespace: string, name: string): Promise<void> {
    await this.apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } });
  }

  /** Applies manifests/rbac/ (the sidecar's ClusterRole) and binds it to the ServiceAccount. */
  async bindSidecarRole(namespace: string, serviceAccount: string): Promise<void> {
    const role = sidecarClusterRole();
    const roleName = role.metadata?.name ?? 'outrigger-sidecar';
    await this.apply(role).catch((e: unknown) => {
      if (!(e instanceof KubeError && e.status === 409)) throw e;
    });
    await this.apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `outrigger-sidecar-${namespace}-${serviceAccount}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
      subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace }],
    });
  }

  /**
   * Mints a real token with the TokenRequest API. boundSecretName binds it to a Secret: deleting
   * that Secret invalidates the token at once, which is how tests make an old token stop working.
   */
  async mintToken(
    namespace: string,
    serviceAccount: string,
    opts: {
      audiences?: string[];
      expirationSeconds?: number;
      boundSecretName?: string;
      boundPodName?: string;
    } = {},
  ): Promise<string> {
    let boundObjectRef: Record<string, string> | undefined;
    if (opts.boundPodName) {
      // Bound to a Pod, as the kubelet's projected tokens are: TokenReview then names the pod.
      const pod = await this.get<{ metadata: { uid: string } }>('Pod', opts.boundPodName, namespace);
      boundObjectRef = { kind: 'Pod', apiVersion: 'v1', name: opts.boundPodName, uid: pod.metadata.uid };
    } else if (opts.boundSecretName) {
      const secret = await this.get<{ metadata: { uid: string } }>('Secret', opts.boundSecretName, namespace);
      boundObjectRef = {
        kind: 'Secret',
        apiVersion: 'v1',
        name: opts.boundSecretName,
        uid: secret.metadata.uid,
      };
    }
    const res = await this.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences: opts.audiences ?? ['https://kubernetes.default.svc.cluster.local'],
          expirationSeconds: opts.expirationSeconds ?? 3600,
          ...(boundObjectRef ? { boundObjectRef } : {}),
        },
      },
    );
    return res.status.token;
  }
}

/** The sidecar's least-privilege ClusterRole, read from the manifests users apply. */
export function sidecarClusterRole(): Obj {
  const text = readFileSync(path.join(repoRoot, 'manifests/rbac/sidecar-clusterrole.yaml'), 'utf8');
  const docs = parseAllDocuments(text).map((d) => d.toJS() as Obj);
  const role = docs.find((d) => d.kind === 'ClusterRole');
  if (!role) throw new Error('manifests/rbac/sidecar-clusterrole.yaml has no ClusterRole');
  return role;
}
