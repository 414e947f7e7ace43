// A test cluster with a real node: `scripts/test-cluster up --with-node` runs containerd, runc,
// the CNI bridge, a kubelet, kube-proxy (iptables) and kube-scheduler (and CoreDNS when built),
// node-side inside a network namespace the script creates. Pods really run; tests reach them
// only from inside that namespace (the host namespace has no route to the node or its pods).
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { delimiter } from 'node:path';
import type { TestContext } from 'node:test';
import { startCluster, type TestCluster } from './cluster.ts';
import { clusterBinariesBuilt, inCI, repoRoot, testBinaries } from './tools.ts';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  timeoutMs?: number;
  /** Resolve with a non-zero exit code instead of throwing. */
  allowFail?: boolean;
  input?: string;
}

export interface NodeInfo {
  name: string;
  /** The node's InternalIP; it lives on the node namespace's lo. */
  ip: string;
  /** The network namespace (under /var/run/netns). */
  netns: string;
  /** The CNI bridge's range; every pod address is in it. */
  podCidr: string;
  /** The cgroup (v1, every hierarchy) the kubelet's `kubepods` tree is under. */
  cgroup: string;
  /** kube-dns's ClusterIP; answered only when `dns` is true. */
  clusterDns: string;
  dns: boolean;
  /** Jaeger runs on the node (OTLP/HTTP :4318, query :16686 on its address), Service observability/jaeger. */
  jaeger: boolean;
  /** Locally built images already imported into the node's containerd. */
  images: { busybox: string; pause: string };
}

export interface TestNodeCluster {
  cluster: TestCluster;
  node: NodeInfo;
  /** kubectl v1.33 with the admin kubeconfig. */
  kubectl(args: string[], opts?: RunOptions): Promise<ExecResult>;
  /** Runs a host program inside the node's network namespace (only the network is entered). */
  inNode(argv: string[], opts?: RunOptions): Promise<ExecResult>;
  /** Imports an image archive into the node's containerd (never a pull). */
  importImage(archive: string, name?: string): Promise<void>;
  stop(): Promise<void>;
}

function onPath(bin: string): boolean {
  const dirs = (process.env.PATH ?? '').split(delimiter).concat(['/usr/sbin', '/sbin']);
  return dirs.some((d) => {
    try {
      accessSync(path.join(d, bin), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Why a node cannot run here, or undefined when it can. */
export function nodeUnavailable(): string | undefined {
  if (process.platform !== 'linux') return `a node needs Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'a node needs root (network and mount namespaces, cgroups)';
  if (!clusterBinariesBuilt({ node: true }))
    return "the node's binaries are not built: run 'scripts/test-cluster build k8s' and 'scripts/test-cluster build node'";
  const tools = [
    'containerd',
    'ctr',
    'runc',
    'nsenter',
    'unshare',
    'ip',
    'iptables',
    'gcc',
    'podman',
    'curl',
  ];
  const missing = tools.filter((t) => !onPath(t));
  if (!existsSync('/usr/lib/cni/bridge')) missing.push('containernetworking-plugins');
  if (!existsSync('/bin/busybox')) missing.push('busybox-static');
  if (missing.length > 0)
    return `missing: ${missing.join(', ')} (apt-get install -y containerd runc containernetworking-plugins podman gcc busybox-static)`;
  if (!existsSync('/sys/fs/cgroup/memory'))
    return 'the node expects cgroup v1 hierarchies under /sys/fs/cgroup';
  return undefined;
}

/** Locally: false and the test skipped with the reason; under CI=true: throws (never a silent skip). */
export function requireNode(t: Pick<TestContext, 'skip'>): boolean {
  const reason = nodeUnavailable();
  if (reason === undefined) return true;
  if (inCI) throw new Error(`CI=true and the test node is unavailable: ${reason}`);
  t.skip(`the test node is unavailable: ${reason}`);
  return false;
}

export function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        const result = { code, stdout: String(stdout), stderr: String(stderr) };
        if (code !== 0 && !opts.allowFail)
          reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${result.stderr.trim()}`));
        else resolve(result);
      },
    );
    child.stdin?.end(opts.input);
  });
}

function readEnvFile(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const i = l.indexOf('=');
        return [l.slice(0, i), l.slice(i + 1)] as [string, string];
      }),
  );
}

/**
 * Starts a cluster with a node (a cold start takes 20-60 s; the images are built once) and
 * stops it with everything the node made when the caller's stop runs.
 */
export async function startNodeCluster(): Promise<TestNodeCluster> {
  const reason = nodeUnavailable();
  if (reason !== undefined) throw new Error(`the test node is unavailable: ${reason}`);
  const cluster = await startCluster(undefined, { node: true });
  if (!cluster) throw new Error('startCluster returned no cluster');
  const env = readEnvFile(path.join(cluster.stateDir, 'node.env'));
  const need = (k: string): string => {
    const v = env[k];
    if (!v) throw new Error(`node.env has no ${k}`);
    return v;
  };
  const node: NodeInfo = {
    name: need('NODE_NAME'),
    ip: need('NODE_IP'),
    netns: need('NODE_NETNS'),
    podCidr: need('POD_CIDR'),
    cgroup: need('NODE_CGROUP'),
    clusterDns: need('CLUSTER_DNS'),
    dns: env.COREDNS === '1',
    jaeger: env.JAEGER === '1',
    images: { busybox: need('BUSYBOX_IMAGE'), pause: need('PAUSE_IMAGE') },
  };
  const kubectl = testBinaries().kubectl;
  const script = path.join(repoRoot, 'scripts/test-cluster');
  return {
    cluster,
    node,
    kubectl: (args, opts) => run(kubectl, ['--kubeconfig', cluster.kubeconfigPath, ...args], opts),
    inNode: (argv, opts) => run('nsenter', [`--net=/var/run/netns/${node.netns}`, '--', ...argv], opts),
    importImage: async (archive, name) => {
      await run(
        'bash',
        [script, '--state-dir', cluster.stateDir, 'import-image', archive, ...(name ? [name] : [])],
        {
          timeoutMs: 300_000,
        },
      );
    },
    stop: () => cluster.stop(),
  };
}

/** The subset of a Pod the tests read. */
export interface PodView {
  metadata: { name: string; namespace: string; uid: string };
  spec: {
    nodeName?: string;
    volumes?: { name: string; projected?: { sources: Record<string, unknown>[] } }[];
  };
  status: {
    phase?: string;
    podIP?: string;
    containerStatuses?: ContainerStatus[];
    initContainerStatuses?: ContainerStatus[];
  };
}

export interface ContainerStatus {
  name: string;
  ready: boolean;
  started?: boolean;
  restartCount: number;
  state: { running?: { startedAt: string }; waiting?: { reason: string }; terminated?: { reason: string } };
}

/** Polls a pod until `done` holds; on timeout the error carries the pod's last status. */
export async function waitForPod(
  c: TestNodeCluster,
  namespace: string,
  name: string,
  done: (p: PodView) => boolean,
  timeoutMs = 90_000,
): Promise<PodView> {
  const deadline = Date.now() + timeoutMs;
  let last: PodView | undefined;
  while (Date.now() < deadline) {
    last = await c.cluster.admin.get<PodView>('Pod', name, namespace);
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 500));
  }
  throw new Error(
    `pod ${namespace}/${name} did not get there in ${timeoutMs} ms: ${JSON.stringify(last?.status)}`,
  );
}

/**
 * A fresh namespace whose `default` ServiceAccount exists: with the ServiceAccount admission
 * plugin on (as on a node cluster), a pod created before the controller makes it is refused.
 */
export async function createPodNamespace(c: TestNodeCluster, prefix: string): Promise<string> {
  const ns = await c.cluster.admin.createNamespace(prefix);
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await c.cluster.admin.get('ServiceAccount', 'default', ns);
      return ns;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
