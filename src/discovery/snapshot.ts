import { open, readFile, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crc32 } from 'node:zlib';
import { createRequire } from 'node:module';
import type protobuf from 'protobufjs';
import { appFile } from '../shared/app-root.ts';
import type { Clock, Timer } from '../shared/clock.ts';
import { errorMessage, OutriggerError } from '../shared/errors.ts';
import type { Logger } from '../shared/log.ts';
import type { Endpoint, Protocol, ServiceInfo, ServiceKey } from './types.ts';

export const SNAPSHOT_FORMAT_VERSION = 1;
const MAGIC = Buffer.from('ORSNAP1\n');

export interface SnapshotData {
  writtenAt: number;
  services: { info: ServiceInfo; syncedAt?: number }[];
  index: { key: ServiceKey; clusterIPs: string[] }[];
  /** Gateway mode only; discovery stores these opaquely (JSON text of slimmed API objects). */
  gateway?: GatewaySnapshot;
  /** A sidecar's HTTPRoutes and ReferenceGrants (--mesh-routes), stored opaquely as well. */
  meshRoutes?: string[];
}

/** Objects of another component kept in a resolver's snapshot file, as JSON text. */
export interface SnapshotPart {
  collect(): string[];
  /** Objects from the file: served (stale) until a complete list replaces them. */
  load(texts: readonly string[]): void;
}

export interface GatewaySnapshot {
  ingresses: string[];
  ingressClasses: string[];
  tlsSecrets: { namespace: string; name: string; resourceVersion: string; certPem: string; keyPem: string }[];
  /** Gateway API objects (JSON text), with --gateway-api. */
  gatewayApi: string[];
}

let schema: protobuf.Type | undefined;
function snapshotType(): protobuf.Type {
  if (schema) return schema;
  const file = appFile('proto/outrigger/v1/snapshot.proto');
  // Loaded on first use: a sidecar without --snapshot never pays for protobufjs.
  const pb = createRequire(import.meta.url)('protobufjs') as typeof protobuf;
  schema = pb.loadSync(file).lookupType('outrigger.v1.Snapshot');
  return schema;
}

/** Endpoint messages decode to exactly the domain shape (same names, optional strings). */
type PbEndpoint = Endpoint;

interface PbService {
  namespace: string;
  name: string;
  type: string;
  headless: boolean;
  clusterIps: string[];
  externalName?: string;
  ports: {
    name: string;
    port: number;
    protocol: string;
    appProtocol?: string;
    targetPortNumber?: number;
    targetPortName?: string;
  }[];
  sessionAffinity: string;
  affinityTimeoutSeconds: number;
  internalTrafficPolicy: string;
  endpoints: { portName: string; endpoints: PbEndpoint[] }[];
  syncedAtMs: number | { toNumber(): number };
}

interface PbSnapshot {
  formatVersion: number;
  writtenAtMs: number | { toNumber(): number };
  services: PbService[];
  index: { namespace: string; name: string; clusterIps: string[] }[];
  ingressesJson: string[];
  ingressClassesJson: string[];
  tlsSecrets: GatewaySnapshot['tlsSecrets'];
  gatewayApiJson: string[];
  meshRoutesJson: string[];
}

const long = (v: number | { toNumber(): number } | undefined): number =>
  v === undefined ? 0 : typeof v === 'number' ? v : v.toNumber();

function toPb(s: ServiceInfo, syncedAt: number | undefined): PbService {
  return {
    namespace: s.key.namespace,
    name: s.key.name,
    type: s.type,
    headless: s.headless,
    clusterIps: s.clusterIPs,
    ...(s.externalName ? { externalName: s.externalName } : {}),
    ports: s.ports.map((p) => ({
      name: p.name,
      port: p.port,
      protocol: p.protocol,
      ...(p.appProtocol ? { appProtocol: p.appProtocol } : {}),
      ...(typeof p.targetPort === 'number' ? { targetPortNumber: p.targetPort } : {}),
      ...(typeof p.targetPort === 'string' ? { targetPortName: p.targetPort } : {}),
    })),
    sessionAffinity: s.sessionAffinity,
    affinityTimeoutSeconds: s.affinityTimeoutSeconds,
    internalTrafficPolicy: s.internalTrafficPolicy,
    endpoints: [...s.endpoints].map(([portName, eps]) => ({ portName, endpoints: eps })),
    syncedAtMs: syncedAt ?? 0,
  };
}

function fromPb(p: PbService): ServiceInfo {
  const info: ServiceInfo = {
    key: { namespace: p.namespace, name: p.name },
    type: (['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'].includes(p.type)
      ? p.type
      : 'ClusterIP') as ServiceInfo['type'],
    headless: p.headless,
    clusterIPs: [...p.clusterIps],
    ports: p.ports.map((q) => ({
      name: q.name,
      port: q.port,
      protocol: (q.protocol || 'TCP') as Protocol,
      ...(q.appProtocol ? { appProtocol: q.appProtocol } : {}),
      ...(q.targetPortNumber ? { targetPort: q.targetPortNumber } : {}),
      ...(q.targetPortName ? { targetPort: q.targetPortName } : {}),
    })),
    sessionAffinity: p.sessionAffinity === 'ClientIP' ? 'ClientIP' : 'None',
    affinityTimeoutSeconds: p.affinityTimeoutSeconds,
    internalTrafficPolicy: p.internalTrafficPolicy === 'Local' ? 'Local' : 'Cluster',
    endpoints: new Map(
      p.endpoints.map((pe) => [
        pe.portName,
        pe.endpoints.map((e): Endpoint => {
          const ep: Endpoint = {
            address: e.address,
            port: e.port,
            ready: e.ready,
            serving: e.serving,
            terminating: e.terminating,
          };
          if (e.hostname) ep.hostname = e.hostname;
          if (e.nodeName) ep.nodeName = e.nodeName;
          if (e.zone) ep.zone = e.zone;
          if (e.podName) ep.podName = e.podName;
          if (e.forZones?.length) ep.forZones = [...e.forZones];
          return ep;
        }),
      ]),
    ),
  };
  if (p.externalName) info.externalName = p.externalName;
  return info;
}

/**
 * The encoded `services` field of each Service, kept per ServiceInfo (discovery replaces the object
 * when anything in it changes): a rollout of one Service re-encodes that one, not all of them,
 * so that a snapshot of 1,000 Services does not hold the event loop for every write. Protobuf
 * allows a message's fields in any order and concatenated encodings to merge, so the file decodes
 * exactly as one encoded in a single pass.
 */
const encodedServices = new WeakMap<ServiceInfo, { syncedAt: number | undefined; field: Uint8Array }>();

function serviceField(T: protobuf.Type, info: ServiceInfo, syncedAt: number | undefined): Uint8Array {
  const have = encodedServices.get(info);
  if (have && have.syncedAt === syncedAt) return have.field;
  const field = T.encode(T.fromObject({ services: [toPb(info, syncedAt)] })).finish();
  encodedServices.set(info, { syncedAt, field });
  return field;
}

export function encodeSnapshot(d: SnapshotData): Buffer {
  const T = snapshotType();
  const msg = T.fromObject({
    formatVersion: SNAPSHOT_FORMAT_VERSION,
    writtenAtMs: d.writtenAt,
    index: d.index.map((e) => ({ namespace: e.key.namespace, name: e.key.name, clusterIps: e.clusterIPs })),
    ...(d.gateway
      ? {
          ingressesJson: d.gateway.ingresses,
          ingressClassesJson: d.gateway.ingressClasses,
          tlsSecrets: d.gateway.tlsSecrets,
          gatewayApiJson: d.gateway.gatewayApi,
        }
      : {}),
    ...(d.meshRoutes ? { meshRoutesJson: d.meshRoutes } : {}),
  });
  const payload = Buffer.concat([
    T.encode(msg).finish(),
    ...d.services.map((s) => serviceField(T, s.info, s.syncedAt)),
  ]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(payload));
  return Buffer.concat([MAGIC, crc, payload]);
}

export function decodeSnapshot(buf: Buffer): SnapshotData {
  const bad = (why: string): OutriggerError => new OutriggerError('snapshot_invalid', why);
  if (buf.length < MAGIC.length + 4 || !buf.subarray(0, MAGIC.length).equals(MAGIC))
    throw bad('not an Outrigger snapshot (bad header)');
  const payload = buf.subarray(MAGIC.length + 4);
  if (buf.readUInt32BE(MAGIC.length) !== crc32(payload))
    throw bad('checksum mismatch (truncated or corrupt)');
  let pb: PbSnapshot;
  try {
    const T = snapshotType();
    pb = T.toObject(T.decode(payload), { defaults: true, arrays: true }) as PbSnapshot;
  } catch (e) {
    throw bad(`undecodable: ${errorMessage(e)}`);
  }
  if (pb.formatVersion !== SNAPSHOT_FORMAT_VERSION)
    throw bad(`format version ${pb.formatVersion}, this build reads ${SNAPSHOT_FORMAT_VERSION}`);
  return {
    writtenAt: long(pb.writtenAtMs),
    services: pb.services.map((s) => {
      const syncedAt = long(s.syncedAtMs);
      return syncedAt ? { info: fromPb(s), syncedAt } : { info: fromPb(s) };
    }),
    index: pb.index.map((e) => ({
      key: { namespace: e.namespace, name: e.name },
      clusterIPs: [...e.clusterIps],
    })),
    gateway: {
      ingresses: [...pb.ingressesJson],
      ingressClasses: [...pb.ingressClassesJson],
      tlsSecrets: pb.tlsSecrets.map((t) => ({ ...t })),
      gatewayApi: [...pb.gatewayApiJson],
    },
    meshRoutes: [...pb.meshRoutesJson],
  };
}

/**
 * Reads the snapshot at start-up. No file: undefined, quietly (first start). An unreadable,
 * corrupt, truncated or wrong-version file: undefined with ONE warning, never a crash.
 */
export async function readSnapshot(path: string, log: Logger): Promise<SnapshotData | undefined> {
  let buf: Buffer;
  try {
    buf = await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      log.warn('snapshot unreadable; starting without it', { path, reason: errorMessage(e) });
    return undefined;
  }
  try {
    return decodeSnapshot(buf);
  } catch (e) {
    log.warn('snapshot ignored', { path, reason: errorMessage(e) });
    return undefined;
  }
}

/** temp file, write, fsync, rename over, fsync the directory: a reader sees the old or the new file. */
export async function writeAtomically(path: string, data: Buffer): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await rename(tmp, path);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  const dir = await open(dirname(path), 'r').catch(() => undefined);
  await dir?.sync().catch(() => undefined);
  await dir?.close();
}

/** The snapshot writer of a component configured with a snapshot path; none without one. */
export function snapshotWriterOf(
  o: { snapshotPath?: string; snapshotDebounceMs?: number; clock: Clock },
  logger: Logger,
  collect: () => SnapshotData,
): SnapshotWriter | undefined {
  if (!o.snapshotPath) return undefined;
  return new SnapshotWriter({
    path: o.snapshotPath,
    clock: o.clock,
    logger,
    collect,
    ...(o.snapshotDebounceMs !== undefined ? { debounceMs: o.snapshotDebounceMs } : {}),
  });
}

/**
 * Writes the snapshot at most once per debounceMs after changes (a rollout that changes many
 * slices costs one write, not hundreds). A failed write is logged once per failure streak.
 */
export class SnapshotWriter {
  readonly #path: string;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #collect: () => SnapshotData;
  readonly #debounceMs: number;
  #timer: Timer | undefined;
  #writing: Promise<void> | undefined;
  #failing = false;
  writes = 0;

  constructor(o: {
    path: string;
    clock: Clock;
    logger: Logger;
    collect: () => SnapshotData;
    debounceMs?: number;
  }) {
    this.#path = o.path;
    this.#clock = o.clock;
    this.#log = o.logger;
    this.#collect = o.collect;
    this.#debounceMs = o.debounceMs ?? 2_000;
  }

  schedule(): void {
    this.#timer ??= this.#clock.setTimer(this.#debounceMs, () => {
      this.#timer = undefined;
      void this.flush();
    });
  }

  async flush(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#writing;
    const data = encodeSnapshot(this.#collect());
    this.#writing = writeAtomically(this.#path, data)
      .then(() => {
        this.writes++;
        if (this.#failing) this.#log.info('snapshot written again', { path: this.#path });
        this.#failing = false;
      })
      .catch((e: unknown) => {
        if (!this.#failing)
          this.#log.warn('snapshot write failed', { path: this.#path, reason: errorMessage(e) });
        this.#failing = true;
      })
      .finally(() => (this.#writing = undefined));
    await this.#writing;
  }

  /** Cancels a pending write; with flush, writes the current state first. */
  async close(flush: boolean): Promise<void> {
    if (flush && this.#timer) await this.flush();
    this.#timer?.cancel();
    await this.#writing;
  }
}
