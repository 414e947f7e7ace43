import { OutriggerError } from '../shared/errors.ts';
import { CidrError, parseCidr } from './cidr.ts';

/**
 * A parser turns one raw string into a typed value or throws with what is allowed; `show` writes a
 * value back the way a user types it, for help and docs (a duration kept in ms shows as 30s).
 */
export type Parser<T> = {
  parse(raw: string): T;
  allowed: string;
  show?(v: T): string;
  /** What joins a repeated flag's values into the one string parse reads; a comma unless set. */
  join?: string;
};

/** A refused value; the optional message says which part was wrong, after what is allowed. */
export class ValueError extends Error {}

function parser<T>(allowed: string, parse: (raw: string) => T): Parser<T> {
  return { allowed, parse };
}

export const port = parser('an integer from 1 to 65535', (raw) => {
  const n = /^\d{1,5}$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new ValueError();
  return n;
});

/** A listener's port; 0 lets the system pick a free one (tests, local runs). */
export const listenPort = parser('an integer from 0 to 65535 (0: any free port)', (raw) => {
  const n = /^\d{1,5}$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!(n >= 0 && n <= 65535)) throw new ValueError();
  return n;
});

/** A listener that may be turned off: its port, or undefined for off. */
export const portOrOff: Parser<number | undefined> = {
  allowed: `${listenPort.allowed}, or off`,
  parse: (raw) => (raw.trim() === 'off' ? undefined : listenPort.parse(raw)),
  show: (v) => (v === undefined ? 'off' : String(v)),
};

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Largest unit that divides the duration: 90000 shows as 90s, 86400000 as 24h (days from 2d). */
export function showDuration(ms: number): string {
  const units = Object.entries(UNIT_MS).reverse() as [keyof typeof UNIT_MS, number][];
  const fits = ([unit, size]: [string, number]): boolean =>
    ms !== 0 && ms % size === 0 && (unit !== 'd' || ms >= 2 * size);
  const [unit, size] = units.find(fits) ?? ['s', 1_000];
  return `${ms / size}${unit}`;
}

/** A whole number and a unit (ms, s, m, h, d), as kubectl and Istio write durations; kept in ms. */
export function duration(minMs: number, maxMs: number): Parser<number> {
  return {
    allowed: `a duration such as 500ms, 30s, 5m, 24h or 30d, from ${showDuration(minMs)} to ${showDuration(maxMs)}`,
    parse(raw) {
      const m = /^(\d{1,9})(ms|s|m|h|d)$/.exec(raw.trim());
      const ms = m ? Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS] : NaN;
      if (!(ms >= minMs && ms <= maxMs)) throw new ValueError();
      return ms;
    },
    show: showDuration,
  };
}

/** A duration kept in seconds (--drain-duration 25s is 25). */
export function inSeconds(ms: Parser<number>): Parser<number> {
  return { allowed: ms.allowed, parse: (raw) => ms.parse(raw) / 1_000, show: (s) => showDuration(s * 1_000) };
}

/** A duration's old spelling, a bare number of a fixed unit (--drain-seconds 25), kept in ms. */
export function countOf(unit: 'ms' | 's' | 'd', minMs: number, maxMs: number): Parser<number> {
  const size = UNIT_MS[unit];
  return parser(`an integer from ${minMs / size} to ${maxMs / size}`, (raw) => {
    const n = /^\d{1,9}$/.test(raw.trim()) ? Number(raw) * size : NaN;
    if (!(n >= minMs && n <= maxMs)) throw new ValueError();
    return n;
  });
}

/** Comma-separated ports; repeated flags are joined with commas before parsing. */
export const ports = parser('comma-separated integers from 1 to 65535', (raw) =>
  raw.trim() === '' ? [] : raw.split(',').map((part) => port.parse(part)),
);

export function intRange(min: number, max: number): Parser<number> {
  return parser(`an integer from ${min} to ${max}`, (raw) => {
    const n = /^-?\d+$/.test(raw.trim()) ? Number(raw) : NaN;
    if (!(n >= min && n <= max)) throw new ValueError();
    return n;
  });
}

export const ratio = parser('a number from 0 to 1', (raw) => {
  const n = /^\s*(\d+(\.\d*)?|\.\d+)\s*$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 0 && n <= 1)) throw new ValueError();
  return n;
});

export function oneOf<const T extends string>(...values: T[]): Parser<T> {
  return parser(`one of ${values.join(', ')}`, (raw) => {
    const v = raw.trim() as T;
    if (!values.includes(v)) throw new ValueError();
    return v;
  });
}

export const bool = parser('true or false', (raw) => {
  const v = raw.trim().toLowerCase();
  if (v === 'true' || v === 'enabled') return true;
  if (v === 'false' || v === 'disabled') return false;
  throw new ValueError();
});

export const nonEmpty = parser('a non-empty string', (raw) => {
  if (raw.trim() === '') throw new ValueError();
  return raw.trim();
});

/** Comma-separated ports or ranges, as Istio's and Linkerd's exclusion annotations take them. */
export const portList = parser('comma-separated ports or ranges such as 25,8000-8100', (raw) => {
  if (raw.trim() === '') return [];
  return raw.split(',').map((part) => {
    const m = /^\s*(\d{1,5})(?:-(\d{1,5}))?\s*$/.exec(part);
    const lo = Number(m?.[1]);
    const hi = m?.[2] === undefined ? lo : Number(m[2]);
    if (!m || lo < 1 || hi > 65535 || lo > hi) throw new ValueError();
    return lo === hi ? String(lo) : `${lo}:${hi}`;
  });
});

/** Strict (see parseCidr); IPv6 comes out in its canonical form. */
export const cidrList = parser('comma-separated CIDRs such as 10.0.0.0/8,fd00::/8', (raw) => {
  if (raw.trim() === '') return [];
  return raw.split(',').map((part) => {
    try {
      return parseCidr(part).text;
    } catch (e) {
      if (e instanceof CidrError) throw new ValueError(e.message);
      throw e;
    }
  });
});

/** Kubernetes resource quantities (CPU "100m", memory "64Mi"). */
export const quantity = parser('a Kubernetes quantity such as 100m, 0.5, 64Mi or 1Gi', (raw) => {
  if (!/^\+?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?$/.test(raw.trim()))
    throw new ValueError();
  return raw.trim();
});

const BINARY_UNITS = { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 } as const;

/** A size in bytes written as a Kubernetes binary quantity (4Mi), from min to max; 0 is off. */
export function sizeOrOff(minBytes: number, maxBytes: number): Parser<number> {
  const show = (v: number): string => {
    const unit = (['Gi', 'Mi', 'Ki'] as const).find((u) => v % BINARY_UNITS[u] === 0) ?? '';
    return v === 0 ? '0' : `${v / BINARY_UNITS[unit]}${unit}`;
  };
  return {
    allowed: `0 (off) or a size from ${show(minBytes)} to ${show(maxBytes)} such as 4Mi`,
    parse: (raw) => {
      const m = /^(\d{1,10})(Ki|Mi|Gi)?$/.exec(raw.trim());
      const n = m ? Number(m[1]) * BINARY_UNITS[(m[2] ?? '') as keyof typeof BINARY_UNITS] : NaN;
      if (n !== 0 && !(n >= minBytes && n <= maxBytes)) throw new ValueError();
      return n;
    },
    show,
  };
}

export const source = parser('kube or file:PATH', (raw) => {
  const v = raw.trim();
  if (v === 'kube') return { kind: 'kube' as const };
  if (v.startsWith('file:') && v.length > 5) return { kind: 'file' as const, path: v.slice(5) };
  throw new ValueError();
});

export const url = parser('an http:// or https:// URL', (raw) => {
  try {
    const u = new URL(raw.trim());
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ValueError();
    return u.toString();
  } catch {
    throw new ValueError();
  }
});

/** Paths, after one flag (-f a b) or repeated: NUL joins them, since a path may hold a comma, never NUL. */
export const pathList: Parser<string[]> = {
  allowed: "one or more paths ('-' for stdin)",
  join: '\0',
  parse: (raw) => {
    const paths = raw.split('\0').filter((x) => x !== '');
    if (paths.length === 0) throw new ValueError();
    return paths;
  },
};

export const namespaceName = parser(
  'a namespace name (lower-case letters, digits and -, at most 63)',
  (raw) => {
    if (!validNamespace(raw)) throw new ValueError();
    return raw;
  },
);

/** Runs a parser and turns its failure into the one error shape users see. */
export function parseValue<T>(p: Parser<T>, key: string, raw: string, origin: string): T {
  try {
    return p.parse(raw);
  } catch (e) {
    if (!(e instanceof ValueError)) throw e;
    const detail = e.message === '' ? '' : `; ${e.message}`;
    throw new OutriggerError(
      'config_invalid',
      `invalid ${origin} ${key}=${JSON.stringify(raw)}: expected ${p.allowed}${detail}`,
    );
  }
}

export const trustDomain = parser(
  "1-255 characters of a-z, 0-9, '.', '_', '-' such as cluster.local",
  (raw) => {
    if (!/^[a-z0-9._-]{1,255}$/.test(raw.trim())) throw new ValueError();
    return raw.trim();
  },
);

/** Kubernetes names: namespaces are DNS-1123 labels, service accounts DNS-1123 subdomains. */
export const validNamespace = (s: string): boolean => /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(s);
export const validServiceAccount = (s: string): boolean =>
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s);

/** One outrigger.dev/allow-from entry; serviceAccount '*' is every account of the namespace. */
export interface AllowRule {
  namespace: string;
  serviceAccount: string;
}

export const allowFrom = parser(
  'comma-separated namespace/serviceaccount or namespace/* entries, such as shop/checkout,monitoring/* (empty: any caller)',
  (raw): AllowRule[] => {
    const rules: AllowRule[] = [];
    for (const part of raw.split(',')) {
      const entry = part.trim();
      if (!entry) continue;
      const [namespace = '', serviceAccount = '', extra] = entry.split('/');
      if (
        extra !== undefined ||
        !validNamespace(namespace) ||
        !(serviceAccount === '*' || validServiceAccount(serviceAccount))
      )
        throw new ValueError(`entry ${JSON.stringify(entry)} is not of that form`);
      rules.push({ namespace, serviceAccount });
    }
    return rules;
  },
);

/**
 * An app probe the sidecar replays (outrigger.dev/mtls: strict): HTTP with a path, gRPC's health
 * check with `grpc`, else TCP.
 */
export interface AppProbe {
  port: number;
  path?: string;
  scheme?: 'HTTP' | 'HTTPS';
  headers?: Record<string, string>;
  /** The service name asked of grpc.health.v1.Health/Check ('' for the server as a whole). */
  grpc?: { service?: string };
  /** The probe's timeoutSeconds, in ms (kubelet's default, 1 s, when absent). */
  timeoutMs?: number;
}

export const appProbes = parser(
  'a JSON object of /app-health/<container>/<kind> to {"port","path","scheme","headers","grpc":{"service"},"timeoutMs"} (set by the injector)',
  (raw): Record<string, AppProbe> => {
    let v: unknown;
    try {
      v = JSON.parse(raw.trim() || '{}');
    } catch {
      throw new ValueError('not JSON');
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValueError('not an object');
    for (const [key, probe] of Object.entries(v as Record<string, unknown>)) {
      const pr = probe as Partial<AppProbe> | null;
      if (
        !key.startsWith('/app-health/') ||
        typeof pr?.port !== 'number' ||
        !(pr.port >= 1 && pr.port <= 65535) ||
        (pr.timeoutMs !== undefined && !(Number.isInteger(pr.timeoutMs) && pr.timeoutMs > 0)) ||
        (pr.grpc !== undefined && !validGrpc(pr.grpc, pr.path))
      )
        throw new ValueError(`entry ${JSON.stringify(key)} is not one`);
    }
    return v as Record<string, AppProbe>;
  },
);

const validGrpc = (g: unknown, path: unknown): boolean =>
  typeof g === 'object' &&
  g !== null &&
  path === undefined &&
  ((g as { service?: unknown }).service === undefined ||
    typeof (g as { service?: unknown }).service === 'string');
