// Two network-namespace "pods" for transparent-capture e2e tests: joined by a veth pair, each
// with `outrigger iptables` and an `outrigger proxy --capture transparent` running as the proxy
// UID, exactly as the injector sets them up, and a backend app in the server pod.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createNetns, linkNetns, waitForPort, type Netns, type Tool } from './netns.ts';
import { repoRoot } from './tools.ts';

export const PROXY_UID = 2102;
export const APP_UID = 1000;
export const node = process.execPath;
export const main = path.join(repoRoot, 'src/main.ts');
export const app = path.join(repoRoot, 'test/harness/capture-app.ts');
export const tools: Tool[] = ['iptables', 'ip6tables', 'iptables-restore', 'ip6tables-restore', 'setpriv'];

export const CLIENT4 = '10.244.0.5';
export const SERVER4 = '10.244.0.6';
export const CLIENT6 = 'fd00:10:244::5';
export const SERVER6 = 'fd00:10:244::6';
export interface Pods {
  client: Netns;
  server: Netns;
  /** Scratch directory readable by the proxy UID (sources, token directories). */
  dir: string;
  remove(): Promise<void>;
}

/**
 * Two pods joined by a veth pair, each with the capture rules, a sidecar as the proxy UID (common
 * flags plus `sidecarFlags`), and the server pod's backend: HTTP on 8080 (the Service) and 9090
 * (in no Service), raw TCP on 9998. `prepare` runs before the sidecars start (e.g. API bridges).
 */
export async function startPods(
  sidecarFlags: (dir: string) => string[],
  opts: {
    env?: NodeJS.ProcessEnv;
    prepare?: (pods: Pods) => Promise<void>;
    /** Starts the server pod's app; by default the capture app described above. */
    serve?: (server: Netns) => Promise<void>;
  } = {},
): Promise<Pods> {
  const dir = mkdtempSync(path.join(tmpdir(), 'outrigger-e2e-'));
  chmodSync(dir, 0o755); // the sidecars read it as the proxy UID
  const client = await createNetns('client');
  const server = await createNetns('server');
  const pods: Pods = {
    client,
    server,
    dir,
    remove: async () => {
      await client.remove();
      await server.remove();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await linkNetns(client, server, {
      a: [`${CLIENT4}/24`, `${CLIENT6}/64`],
      b: [`${SERVER4}/24`, `${SERVER6}/64`],
      defaultRoutes: true,
    });
    await opts.prepare?.(pods);
    const common = ['--capture', 'transparent', '--log-level', 'warn', '--trace-sampling', '0'];
    const quiet = ['--trace-collector', 'http://127.0.0.1:9/', '--pod-info-dir', dir];
    const flags = sidecarFlags(dir);
    for (const [pod, extra] of [
      [client, []],
      [server, ['--app-port', '8080']],
    ] as const) {
      await pod.exec([node, main, 'iptables']);
      const argv = [node, main, 'proxy', ...common, ...quiet, ...flags, ...extra];
      const sidecar = pod.spawn(argv, { uid: PROXY_UID, env: { ...process.env, ...opts.env } });
      sidecar.stderr?.on('data', (d: Buffer) => process.stderr.write(`[${pod.name}] ${d.toString()}`));
      await waitForPort(pod, '127.0.0.1', 7402, 30_000);
    }
    await (opts.serve ?? serveCaptureApp)(server);
  } catch (e) {
    await pods.remove();
    throw e;
  }
  return pods;
}

async function serveCaptureApp(server: Netns): Promise<void> {
  server.spawn([node, app, 'serve', 'server', '8080,9090', '9998'], { uid: APP_UID });
  await waitForPort(server, '127.0.0.1', 8080);
  await waitForPort(server, '127.0.0.1', 9998);
}
