import { objectKey, type Backend, type GMeta, type Ingress, type PathType } from './objects.ts';

/**
 * The gateway's routing table, built whole from the selected Ingresses and swapped atomically
 * (no request ever sees half a table). Matching follows networking.k8s.io/v1:
 *
 * - Host: the Host header (lowercased, port and trailing dot removed) selects ONE host bucket:
 *   an exact host, else a wildcard `*.suffix` (the host minus exactly its first label equals the
 *   suffix), else the rules without host. There is no fall-through from a host to the host-less
 *   rules: like ingress-nginx's servers and Envoy's virtual hosts, a host that has rules owns its
 *   paths.
 * - Path (path only, no query; case-sensitive; normalised by the handler first, see path.ts): `Exact` must equal the path;
 *   `Prefix` matches element by element split on `/`, a trailing slash ignored on both sides
 *   (`/foo` matches `/foo` and `/foo/bar`, not `/foobar`); `ImplementationSpecific` is `Prefix`.
 *   The longest rule path wins (a trailing slash not counted); on a tie Exact beats Prefix, and of
 *   two Prefix paths that differ only by a trailing slash the one with it wins (the API's rule).
 * - No path matches: the host's default backend (the `spec.defaultBackend` of the oldest Ingress
 *   of the owning namespace with rules for that host), else the catch-all default (that of the oldest Ingress without a
 *   host in its rules, or without rules), else no route (404).
 *
 * Host ownership: a host (as written, so `*.foo.com` and `bar.foo.com` are two names; '' for the
 * catch-all of rules without host and defaultBackend-only Ingresses) belongs to the namespace of
 * the oldest Ingress that claims it by a rule or a TLS entry. Another namespace's rules, default
 * backend and certificate for it are not served: otherwise any namespace that may create an
 * Ingress could add a path to another team's host, served under that team's certificate.
 *
 * Conflicts (within the owning namespace: the same host, path type and path from two Ingresses,
 * two default backends or two TLS Secrets for one host): the oldest `creationTimestamp` wins, then
 * namespace/name in lexical order; the losers are reported. Ownership and conflicts depend only on
 * the set of Ingresses, never on the order they arrived in, so a relist or a snapshot load decides
 * the same way.
 *
 * Lookup cost: one Map probe for the host (two with a wildcard), one Map probe for Exact and a walk
 * down a trie of path elements for Prefix: it depends on the request's path depth, not on how
 * many rules there are.
 */
export interface ServiceBackend {
  namespace: string;
  name: string;
  port: { number: number } | { name: string };
}

export interface Route {
  /** "namespace/name" of the Ingress the rule comes from. */
  ingress: string;
  backend: ServiceBackend;
  /** The rule's host as written ('' for any host). */
  host: string;
  path: string;
  pathType: PathType | 'DefaultBackend';
}

export interface TlsBinding {
  ingress: string;
  /** "namespace/name" of the kubernetes.io/tls Secret. */
  secret: string;
}

/** What an Ingress lost to an older one, and to which. */
export interface Conflict {
  /**
   * host: the host belongs to another namespace, and nothing this Ingress declares for it is
   * served; path, defaultBackend, tls: an older Ingress of the owning namespace has the same.
   */
  kind: 'host' | 'path' | 'defaultBackend' | 'tls';
  /** The host as written; '' for the catch-all. */
  host: string;
  path?: string;
  pathType?: PathType;
  /** "namespace/name" of the Ingress whose declaration is served. */
  winner: string;
  /** The namespace the host belongs to. */
  owner: string;
}

export interface TableProblem {
  ingress: string;
  message: string;
  conflict?: Conflict;
}

interface PrefixNode {
  children: Map<string, PrefixNode> | undefined;
  route: Route | undefined;
}

class HostRoutes {
  readonly exact = new Map<string, Route>();
  readonly prefix: PrefixNode = { children: undefined, route: undefined };
  fallback: Route | undefined;

  /** The older route that already holds the same path and type, or undefined when added. */
  add(route: Route): Route | undefined {
    if (route.pathType === 'Exact') {
      const have = this.exact.get(route.path);
      if (have) return have;
      this.exact.set(route.path, route);
      return undefined;
    }
    let node = this.prefix;
    forEachElement(route.path, (el) => {
      node.children ??= new Map();
      let next = node.children.get(el);
      if (!next) node.children.set(el, (next = { children: undefined, route: undefined }));
      node = next;
    });
    const have = node.route;
    if (have?.path === route.path) return have;
    // `/foo` and `/foo/` share a node and match the same requests; the API says `/foo/` wins.
    if (!have || route.path.endsWith('/')) node.route = route;
    return undefined;
  }

  match(path: string): Route | undefined {
    let node: PrefixNode | undefined = this.prefix;
    let best = node.route;
    // Elements of the request path, without allocating an array per request.
    let start = 1;
    while (node?.children && start < path.length) {
      let end = path.indexOf('/', start);
      if (end < 0) end = path.length;
      node = node.children.get(path.slice(start, end));
      if (node?.route) best = node.route;
      start = end + 1;
    }
    const exact = this.exact.get(path);
    if (exact && (!best || exact.path.length >= elementLength(best.path))) return exact;
    return best;
  }
}

/** Calls fn for each element of a path, a trailing slash ignored (`/a/b/` -> a, b; `/` -> none). */
function forEachElement(path: string, fn: (el: string) => void): void {
  const trimmed = path.endsWith('/') ? path.slice(0, -1) : path;
  if (trimmed === '') return;
  for (const el of trimmed.slice(1).split('/')) fn(el);
}

const elementLength = (path: string): number =>
  path.endsWith('/') && path !== '/' ? path.length - 1 : path.length;

/** Host header -> the host rules are matched against: lowercase, no port, no trailing dot. */
export function normalizeHost(raw: string): string {
  let h = raw.toLowerCase();
  if (h.startsWith('[')) {
    const close = h.indexOf(']');
    return close < 0 ? h : h.slice(0, close + 1);
  }
  const colon = h.lastIndexOf(':');
  if (colon >= 0) h = h.slice(0, colon);
  return h.endsWith('.') ? h.slice(0, -1) : h;
}

/** Creation order, then namespace/name: the order conflicts are settled in (oldest wins). */
export function byAge(a: { metadata: GMeta }, b: { metadata: GMeta }): number {
  const ta = a.metadata.creationTimestamp ?? '';
  const tb = b.metadata.creationTimestamp ?? '';
  if (ta !== tb) return ta < tb ? -1 : 1;
  const ka = objectKey(a.metadata);
  const kb = objectKey(b.metadata);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** An exact-host and a wildcard-suffix index of the same kind of value. */
class HostIndex<T> {
  readonly exact = new Map<string, T>();
  readonly wildcard = new Map<string, T>();

  /** The entry a rule host names, created by make() when missing. */
  at(host: string, make: () => T): T {
    const [map, key] = host.startsWith('*.') ? [this.wildcard, host.slice(2)] : [this.exact, host];
    let v = map.get(key);
    if (v === undefined) map.set(key, (v = make()));
    return v;
  }

  peek(host: string): T | undefined {
    return host.startsWith('*.') ? this.wildcard.get(host.slice(2)) : this.exact.get(host);
  }

  /** A request host: exact first, then a wildcard for its suffix after exactly one label. */
  find(host: string): T | undefined {
    const hit = this.exact.get(host);
    if (hit !== undefined) return hit;
    const dot = host.indexOf('.');
    return dot > 0 ? this.wildcard.get(host.slice(dot + 1)) : undefined;
  }
}

/** The hosts an Ingress's rules name and that are valid ('' for a rule without host). */
function ruleHosts(ing: Ingress): Set<string> {
  const out = new Set<string>();
  for (const r of ing.spec.rules) if (r.host === '' || validRuleHost(r.host)) out.add(r.host);
  return out;
}

/**
 * Every host an Ingress claims: its rules' hosts, the hosts its TLS Secrets are for, and the
 * catch-all when its defaultBackend is the catch-all (it has no valid rule).
 */
function claims(ing: Ingress): Set<string> {
  const out = ruleHosts(ing);
  if (out.size === 0 && ing.spec.defaultBackend) out.add('');
  for (const t of ing.spec.tls) if (t.secretName) for (const h of t.hosts) out.add(h);
  return out;
}

/** Host -> the oldest Ingress claiming it; sorted must be oldest first. */
function hostOwners(sorted: readonly Ingress[]): Map<string, Ingress> {
  const owners = new Map<string, Ingress>();
  for (const ing of sorted) for (const h of claims(ing)) if (!owners.has(h)) owners.set(h, ing);
  return owners;
}

export class RouteTable {
  readonly #hosts = new HostIndex<HostRoutes>();
  readonly #anyHost = new HostRoutes();
  readonly #tls = new HostIndex<TlsBinding>();
  readonly #owners: Map<string, Ingress>;
  /** Ingresses of which nothing is served because every host they claim is another namespace's. */
  readonly #refused = new Set<string>();
  readonly problems: TableProblem[] = [];
  /** Ingresses of which something is served. */
  readonly ingresses: number;
  routes = 0;

  /** Builds the table; the Ingresses are sorted by age here, so the input order does not matter. */
  constructor(ingresses: Iterable<Ingress>) {
    const sorted = [...ingresses].sort(byAge);
    this.#owners = hostOwners(sorted);
    for (const ing of sorted) this.#addIngress(ing);
    this.ingresses = sorted.length - this.#refused.size;
  }

  /** False for an Ingress whose every host belongs to another namespace: nothing of it is served. */
  serves(ing: Ingress): boolean {
    return !this.#refused.has(objectKey(ing.metadata));
  }

  /** The problems that are conflicts: what an Ingress lost to an older one. */
  conflicts(): TableProblem[] {
    return this.problems.filter((p) => p.conflict);
  }

  /** The route for a request, or undefined (404). host is the raw Host header. */
  lookup(host: string, path: string): Route | undefined {
    const bucket = this.#hosts.find(normalizeHost(host)) ?? this.#anyHost;
    return bucket.match(path) ?? bucket.fallback ?? this.#anyHost.fallback;
  }

  /** The TLS Secret for an SNI server name (exact host, then a one-label wildcard). */
  tlsFor(serverName: string): TlsBinding | undefined {
    return this.#tls.find(normalizeHost(serverName));
  }

  /** Every Secret any Ingress names for TLS ("namespace/name"). */
  tlsSecrets(): Set<string> {
    const out = new Set<string>();
    for (const b of [...this.#tls.exact.values(), ...this.#tls.wildcard.values()]) out.add(b.secret);
    return out;
  }

  /** Every Service a route points at ("namespace/name"). */
  services(): Set<string> {
    const out = new Set<string>();
    const visit = (h: HostRoutes): void => {
      const walk = (n: PrefixNode): void => {
        if (n.route) out.add(`${n.route.backend.namespace}/${n.route.backend.name}`);
        for (const c of n.children?.values() ?? []) walk(c);
      };
      walk(h.prefix);
      for (const r of h.exact.values()) out.add(`${r.backend.namespace}/${r.backend.name}`);
      if (h.fallback) out.add(`${h.fallback.backend.namespace}/${h.fallback.backend.name}`);
    };
    for (const h of [...this.#hosts.exact.values(), ...this.#hosts.wildcard.values(), this.#anyHost])
      visit(h);
    return out;
  }

  #bucket(host: string): HostRoutes {
    return host === '' ? this.#anyHost : this.#hosts.at(host, () => new HostRoutes());
  }

  #addIngress(ing: Ingress): void {
    const id = objectKey(ing.metadata);
    const ns = ing.metadata.namespace;
    const problem = (message: string, conflict?: Conflict): void =>
      void this.problems.push({ ingress: id, message, ...(conflict ? { conflict } : {}) });
    const lost = new Set<string>();
    /** Whether ns owns host; the first time it does not, the whole host is reported once. */
    const owns = (host: string): boolean => {
      const owner = this.#owners.get(host);
      if (!owner || owner.metadata.namespace === ns) return true;
      if (!lost.has(host)) {
        lost.add(host);
        const winner = objectKey(owner.metadata);
        const on = owner.metadata.namespace;
        problem(
          `${host || 'the catch-all (any host)'} belongs to namespace ${on} (${winner} claimed it first); ` +
            'nothing this Ingress declares for it is served',
          { kind: 'host', host, winner, owner: on },
        );
      }
      return false;
    };
    let served = 0;
    served += this.#addRules(ing, id, owns, problem);
    served += this.#addDefault(ing, id, owns, problem);
    served += this.#addTls(ing, id, owns, problem);
    if (served === 0 && lost.size > 0) this.#refused.add(id);
  }

  /** The Ingress's rules on the hosts its namespace owns; the number of routes added. */
  #addRules(ing: Ingress, id: string, owns: (h: string) => boolean, problem: ProblemSink): number {
    const ns = ing.metadata.namespace;
    let added = 0;
    for (const rule of ing.spec.rules) {
      if (rule.host !== '' && !validRuleHost(rule.host)) {
        problem(`host ${JSON.stringify(rule.host)} is not a valid Ingress host; rule skipped`);
        continue;
      }
      if (!owns(rule.host)) continue;
      const bucket = this.#bucket(rule.host);
      for (const p of rule.paths) {
        const where = `${rule.host || '*'}${p.path}`;
        if (!p.path.startsWith('/')) {
          problem(`${where}: path must start with "/"; skipped`);
          continue;
        }
        const backend = backendOf(ns, p.backend, where, problem);
        if (!backend) continue;
        const pathType = p.pathType === 'ImplementationSpecific' ? 'Prefix' : p.pathType;
        const route: Route = { ingress: id, backend, host: rule.host, path: p.path, pathType };
        const older = bucket.add(route);
        if (!older) {
          added++;
          continue;
        }
        problem(`${where} (${pathType}): ${older.ingress} is older and routes it; ignored`, {
          kind: 'path',
          host: rule.host,
          path: p.path,
          pathType,
          winner: older.ingress,
          owner: ns,
        });
      }
    }
    this.routes += added;
    return added;
  }

  /**
   * spec.defaultBackend: the default of the hosts the Ingress's rules name, or the catch-all when
   * it has no rules (or only host-less ones); only where its namespace owns the host.
   */
  #addDefault(ing: Ingress, id: string, owns: (h: string) => boolean, problem: ProblemSink): number {
    const ns = ing.metadata.namespace;
    const db = ing.spec.defaultBackend;
    const fallback = db && backendOf(ns, db, 'defaultBackend', problem);
    if (!fallback) return 0;
    const route: Route = { ingress: id, backend: fallback, host: '', path: '', pathType: 'DefaultBackend' };
    const hosts = ruleHosts(ing);
    if (hosts.size === 0) hosts.add('');
    let bound = 0;
    for (const h of hosts) {
      if (!owns(h)) continue;
      const bucket = this.#bucket(h);
      if (!bucket.fallback) {
        bucket.fallback = route;
        bound++;
      } else if (bucket.fallback.ingress !== id) {
        const winner = bucket.fallback.ingress;
        problem(`defaultBackend for ${h || 'any host'}: ${winner} is older and wins`, {
          kind: 'defaultBackend',
          host: h,
          winner,
          owner: ns,
        });
      }
    }
    return bound;
  }

  /** The Ingress's TLS Secrets for the hosts its namespace owns; the number of hosts bound. */
  #addTls(ing: Ingress, id: string, owns: (h: string) => boolean, problem: ProblemSink): number {
    const ns = ing.metadata.namespace;
    let bound = 0;
    for (const t of ing.spec.tls) {
      if (!t.secretName) continue;
      const secret = `${ns}/${t.secretName}`;
      for (const h of t.hosts) {
        if (!owns(h)) continue;
        const have = this.#tls.peek(h);
        if (!have) {
          this.#tls.at(h, () => ({ ingress: id, secret }));
          bound++;
        } else if (have.secret !== secret)
          problem(`TLS for ${h}: ${have.ingress} is older and its Secret wins`, {
            kind: 'tls',
            host: h,
            winner: have.ingress,
            owner: ns,
          });
      }
    }
    return bound;
  }
}

type ProblemSink = (message: string, conflict?: Conflict) => void;

function backendOf(ns: string, b: Backend, where: string, problem: ProblemSink): ServiceBackend | undefined {
  if (b.kind === 'service') return { namespace: ns, name: b.name, port: b.port };
  problem(`${where}: resource backends (${b.kind_} ${b.name}) are not supported; skipped`);
  return undefined;
}

/** A DNS name, or `*.` and a DNS name: what the API server's validation admits for rule hosts. */
function validRuleHost(h: string): boolean {
  const name = h.startsWith('*.') ? h.slice(2) : h;
  return /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name);
}
