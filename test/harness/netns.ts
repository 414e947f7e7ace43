// Pod emulation with Linux network namespaces. Every address a test
// uses lives inside a namespace the test created; the host namespace is never given an address,
// a route or a rule. Namespaces and the processes started in them are removed even when a test
// fails or the process exits early.
import { execFile, execFileSync, spawn } from 'node:child_process';
import type { ChildProcess, SpawnOptions } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net, { type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { TestContext } from 'node:test';

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunAs {
  /** Run as this UID/GID inside the namespace (the sidecar's UID, so iptables owner rules match). */
  uid?: number;
  gid?: number;
}

export interface ExecOptions extends RunAs {
  input?: string;
  timeoutMs?: number;
  /** Resolve with a non-zero exit code instead of throwing. */
  allowFail?: boolean;
  env?: NodeJS.ProcessEnv;
}

export interface Netns {
  readonly name: string;
  /** Runs a command to completion inside the namespace. */
  exec(argv: string[], opts?: ExecOptions): Promise<ExecResult>;
  /** Starts a long-running process inside the namespace; it is killed when the namespace is removed. */
  spawn(argv: string[], opts?: RunAs & SpawnOptions): ChildProcess;
  remove(): Promise<void>;
}

export interface CreateOptions {
  /**
   * CIDRs routed to the namespace's own `lo` ("AnyIP"): every address in them is local, so a
   * server can bind e.g. 10.244.0.5 and an EndpointSlice can name it without a veth.
   */
  localRanges?: string[];
  /** Registers removal with a test context (node:test's `t.after`). */
  t?: { after(fn: () => unknown): void };
}

/** Tools a test can require beyond `ip`; each must be on PATH. */
export type Tool =
  | 'ip'
  | 'iptables'
  | 'ip6tables'
  | 'iptables-restore'
  | 'ip6tables-restore'
  | 'iptables-legacy-restore'
  | 'setpriv';

const PREFIX = 'ort';
const live = new Map<string, Set<ChildProcess>>();
let counter = 0;

function onPath(bin: string): boolean {
  const dirs = (process.env.PATH ?? '').split(delimiter).concat(['/usr/sbin', '/sbin']);
  return dirs.some((d) => {
    try {
      accessSync(join(d, bin), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** Why network-namespace tests cannot run here, or undefined when they can. */
export function netnsUnavailable(tools: Tool[] = []): string | undefined {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN)';
  const missing = (['ip', ...tools] as Tool[]).filter((t) => !onPath(t));
  if (missing.length > 0)
    return `missing tools: ${missing.join(', ')} (Debian packages iproute2, iptables, util-linux)`;
  return undefined;
}

/**
 * For the top of a namespace test: false (and the test skipped) when namespaces are unavailable
 * locally; under CI=true a missing tool throws, so the test FAILS instead of passing as a skip.
 */
export function requireNetns(t: Pick<TestContext, 'skip'>, tools: Tool[] = []): boolean {
  const reason = netnsUnavailable(tools);
  if (reason === undefined) return true;
  // Read at call time (not import time) so the CI rule holds however the environment was set.
  if (process.env.CI === 'true')
    throw new Error(`CI=true and network-namespace testing is unavailable: ${reason}`);
  t.skip(`network-namespace testing is unavailable: ${reason}`);
  return false;
}

function run(cmd: string, args: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 16 << 20, env: opts.env ?? process.env },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        const result = { code, stdout: String(stdout), stderr: String(stderr) };
        if (code !== 0 && !opts.allowFail)
          reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${result.stderr.trim()}`));
        else resolve(result);
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    else child.stdin?.end();
  });
}

// The UID must change (iptables owner rules match on it), but the checkout may sit in a 0700
// directory (CI clones into mktemp -d): keep CAP_DAC_READ_SEARCH as an ambient capability so the
// process can still read the sources it runs.
function wrap(name: string, argv: string[], as: RunAs): string[] {
  const drop =
    as.uid === undefined
      ? []
      : [
          'setpriv',
          `--reuid=${as.uid}`,
          `--regid=${as.gid ?? as.uid}`,
          '--clear-groups',
          '--inh-caps=+dac_read_search',
          '--ambient-caps=+dac_read_search',
          '--',
        ];
  return ['netns', 'exec', name, ...drop, ...argv];
}

/** Runs argv inside a namespace (by name or handle); throws on a non-zero exit unless allowFail. */
export function execIn(ns: Netns | string, argv: string[], opts: ExecOptions = {}): Promise<ExecResult> {
  const name = typeof ns === 'string' ? ns : ns.name;
  return run('ip', wrap(name, argv, opts), opts);
}

/** Starts a process inside a namespace; `ip netns exec` and setpriv exec, so child.pid is the process. */
export function spawnIn(ns: Netns | string, argv: string[], opts: RunAs & SpawnOptions = {}): ChildProcess {
  const name = typeof ns === 'string' ? ns : ns.name;
  const { uid, gid, ...spawnOpts } = opts;
  const child = spawn('ip', wrap(name, argv, { uid, gid }), { stdio: 'pipe', ...spawnOpts });
  const set = live.get(name);
  set?.add(child);
  child.once('exit', () => set?.delete(child));
  return child;
}

function killAll(name: string): void {
  for (const child of live.get(name) ?? []) if (child.exitCode === null) child.kill('SIGKILL');
  // Anything else still inside (grandchildren) keeps the namespace alive; `ip netns pids` finds it.
  try {
    const pids = execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).split(/\s+/);
    for (const pid of pids.filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
  } catch {
    // gone already
  }
}

function removeSync(name: string): void {
  killAll(name);
  live.delete(name);
  try {
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    // already removed
  }
}

/** Removes a namespace and kills every process in it. Idempotent. */
export async function removeNetns(ns: Netns | string): Promise<void> {
  const name = typeof ns === 'string' ? ns : ns.name;
  killAll(name);
  live.delete(name);
  await run('ip', ['netns', 'del', name], { allowFail: true });
}

process.once('exit', () => {
  for (const name of [...live.keys()]) removeSync(name);
});
// A signal (the test runner's timeout sends SIGTERM) would skip 'exit' hooks; exit properly instead.
for (const [sig, n] of [
  ['SIGINT', 2],
  ['SIGTERM', 15],
  ['SIGHUP', 1],
] as const)
  process.once(sig, () => process.exit(128 + n));

/** Removes namespaces left by earlier runs of this harness whose process is dead. */
function reapStale(): void {
  let names: string[];
  try {
    names = readdirSync('/var/run/netns');
  } catch {
    return;
  }
  for (const name of names) {
    const m = new RegExp(`^${PREFIX}-[a-z0-9]+-(\\d+)-\\d+$`).exec(name);
    if (!m || Number(m[1]) === process.pid) continue;
    try {
      process.kill(Number(m[1]), 0);
    } catch {
      removeSync(name);
    }
  }
}

/** The namespace name for a prefix: ort-<prefix>-<pid>-<n>, unique per process. */
function freshName(prefix: string): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9]/g, '') || 'ns';
  return `${PREFIX}-${clean}-${process.pid}-${++counter}`;
}

/**
 * Creates a fresh network namespace with `lo` up and optional local ranges. The name is derived
 * from the prefix and made unique. Pass `t` to remove it when the test ends.
 */
export async function createNetns(prefix: string, opts: CreateOptions = {}): Promise<Netns> {
  if (counter === 0) reapStale();
  const name = freshName(prefix);
  await run('ip', ['netns', 'add', name]);
  live.set(name, new Set());
  const ns: Netns = {
    name,
    exec: (argv, o) => execIn(name, argv, o),
    spawn: (argv, o) => spawnIn(name, argv, o),
    remove: () => removeNetns(name),
  };
  opts.t?.after(() => ns.remove());
  try {
    await run('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    for (const cidr of opts.localRanges ?? []) await addLocalRange(ns, cidr);
  } catch (e) {
    await ns.remove();
    throw e;
  }
  return ns;
}

/** Makes every address of a CIDR local to the namespace (AnyIP on lo), IPv4 or IPv6. */
export async function addLocalRange(ns: Netns, cidr: string): Promise<void> {
  const v6 = cidr.includes(':');
  await run('ip', ['-n', ns.name, ...(v6 ? ['-6'] : []), 'route', 'add', 'local', cidr, 'dev', 'lo']);
  if (v6) await ns.exec(['sysctl', '-q', '-w', 'net.ipv6.ip_nonlocal_bind=1']);
}

/** Runs fn with a fresh namespace and removes it afterwards, whatever fn does. */
export async function withNetns<T>(
  prefix: string,
  fn: (ns: Netns) => Promise<T>,
  opts: Omit<CreateOptions, 't'> = {},
): Promise<T> {
  const ns = await createNetns(prefix, opts);
  try {
    return await fn(ns);
  } finally {
    await ns.remove();
  }
}

export interface LinkOptions {
  /** Address with prefix length for each end, e.g. 10.244.1.1/24; IPv6 ones are added nodad. */
  a: string[];
  b: string[];
  /** Add a default route through the link in each namespace (a pod's usual routing). */
  defaultRoutes?: boolean;
}

/**
 * Joins two namespaces with a veth pair. Both ends live in test namespaces; the host namespace
 * only holds the pair for the instant between creation and the move.
 */
export async function linkNetns(a: Netns, b: Netns, opts: LinkOptions): Promise<void> {
  const id = `${process.pid % 100000}${++counter}`;
  const [ea, eb] = [`oa${id}`.slice(0, 15), `ob${id}`.slice(0, 15)];
  // Created directly inside namespace a with its peer in b: never visible in the host namespace.
  await run('ip', ['-n', a.name, 'link', 'add', ea, 'type', 'veth', 'peer', 'name', eb, 'netns', b.name]);
  for (const [ns, dev, addrs] of [
    [a, ea, opts.a],
    [b, eb, opts.b],
  ] as const) {
    for (const addr of addrs) {
      const v6 = addr.includes(':');
      await run('ip', ['-n', ns.name, 'addr', 'add', addr, 'dev', dev, ...(v6 ? ['nodad'] : [])]);
    }
    await run('ip', ['-n', ns.name, 'link', 'set', dev, 'up']);
    if (opts.defaultRoutes) {
      if (addrs.some((x) => !x.includes(':')))
        await run('ip', ['-n', ns.name, 'route', 'add', 'default', 'dev', dev]);
      if (addrs.some((x) => x.includes(':')))
        await run('ip', ['-n', ns.name, '-6', 'route', 'add', 'default', 'dev', dev]);
    }
  }
}

/** Waits until a TCP port accepts connections inside the namespace (bounded). */
export async function waitForPort(ns: Netns, host: string, port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const probe = `require('net').connect(${port}, ${JSON.stringify(host)}).on('connect', () => process.exit(0)).on('error', () => process.exit(1))`;
  for (;;) {
    const r = await ns.exec([process.execPath, '-e', probe], { allowFail: true, timeoutMs: 5_000 });
    if (r.code === 0) return;
    if (Date.now() > deadline)
      throw new Error(`${host}:${port} not listening in ${ns.name} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Bridge {
  /** Where processes inside the namespace connect. */
  host: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Makes a host-namespace TCP service (the test API server, Jaeger) reachable from inside a
 * namespace at 127.0.0.1:listenPort, without giving either namespace a route to the other: a
 * relay in the namespace pipes into a Unix socket (file system, not network namespace) that the
 * test process pipes on to the target. TLS passes through untouched, so the server certificate
 * must name 127.0.0.1 (the test API server's does).
 */
export async function bridgeIntoNetns(
  ns: Netns,
  target: { host: string; port: number },
  listenPort: number,
): Promise<Bridge> {
  const dir = mkdtempSync(join(tmpdir(), 'ort-bridge-'));
  const sock = join(dir, 'relay.sock');
  const conns = new Set<Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(target.port, target.host);
    for (const s of [inbound, outbound]) {
      conns.add(s);
      s.on('close', () => conns.delete(s));
      s.on('error', () => (inbound.destroy(), outbound.destroy()));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  const relay = `const net=require('net');net.createServer(c=>{const u=net.connect(${JSON.stringify(sock)});c.on('error',()=>u.destroy());u.on('error',()=>c.destroy());c.pipe(u).pipe(c)}).listen(${listenPort},'127.0.0.1')`;
  const child = ns.spawn([process.execPath, '-e', relay]);
  await waitForPort(ns, '127.0.0.1', listenPort);
  return {
    host: '127.0.0.1',
    port: listenPort,
    close: async () => {
      child.kill('SIGKILL');
      for (const s of conns) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
