import type { BackendRef, Filter, ReferenceGrant } from './objects.ts';
import { GATEWAY_GROUP } from './objects.ts';

/**
 * A rule's backendRefs, resolved once when the table is built: a Service port in the route's
 * namespace, or in another namespace that a ReferenceGrant opens to HTTPRoutes of the route's
 * namespace. Anything else stays in the list with its reason, so that its share of the weight
 * is answered 500 as the spec asks, instead of being moved to the valid backends.
 */
export interface ServiceTarget {
  namespace: string;
  name: string;
  port: { number: number };
}

export type RouteBackend = { weight: number; filters: Filter[] } & (
  | { target: ServiceTarget }
  | { invalid: { reason: 'InvalidKind' | 'RefNotPermitted' | 'UnsupportedValue'; message: string } }
);

/** Whether a grant lets an object of `from` (group, kind, namespace) refer to `to`. */
export function granted(
  grants: readonly ReferenceGrant[],
  from: { group: string; kind: string; namespace: string },
  to: { group: string; kind: string; namespace: string; name: string },
): boolean {
  return grants.some(
    (g) =>
      g.metadata.namespace === to.namespace &&
      g.spec.from.some(
        (f) => f.group === from.group && f.kind === from.kind && f.namespace === from.namespace,
      ) &&
      g.spec.to.some(
        (t) => t.group === to.group && t.kind === to.kind && (t.name === undefined || t.name === to.name),
      ),
  );
}

/**
 * What a backendRef in another namespace needs: a ReferenceGrant there (a Gateway's route), or
 * nothing (a mesh route: it only changes where a call its client could make anyway goes, so it
 * reaches no further than the client does; GEP-1294).
 */
export type CrossNamespace = readonly ReferenceGrant[] | 'open';

export function resolveBackend(
  ref: BackendRef,
  routeNamespace: string,
  grants: CrossNamespace,
  routeKind = 'HTTPRoute',
): RouteBackend {
  const base = { weight: ref.weight, filters: ref.filters };
  const namespace = ref.namespace ?? routeNamespace;
  if (ref.group !== '' || ref.kind !== 'Service') {
    return {
      ...base,
      invalid: {
        reason: 'InvalidKind',
        message: `backendRef kind ${ref.group || 'core'}/${ref.kind} is not supported`,
      },
    };
  }
  if (ref.port === undefined) {
    return {
      ...base,
      invalid: { reason: 'UnsupportedValue', message: `backendRef ${namespace}/${ref.name} has no port` },
    };
  }
  const from = { group: GATEWAY_GROUP, kind: routeKind, namespace: routeNamespace };
  if (
    namespace !== routeNamespace &&
    grants !== 'open' &&
    !granted(grants, from, { group: '', kind: 'Service', namespace, name: ref.name })
  ) {
    return {
      ...base,
      invalid: {
        reason: 'RefNotPermitted',
        message: `no ReferenceGrant in ${namespace} allows ${routeKind}s of ${routeNamespace} to use Service ${ref.name}`,
      },
    };
  }
  return { ...base, target: { namespace, name: ref.name, port: { number: ref.port } } };
}

/**
 * One backend by weight (`random` in [0, 1)); undefined when every weight is 0, which the spec
 * answers with 500.
 */
export function pickBackend(
  backends: readonly RouteBackend[],
  random: () => number,
): RouteBackend | undefined {
  let total = 0;
  for (const b of backends) total += b.weight;
  if (total <= 0) return undefined;
  let x = random() * total;
  for (const b of backends) {
    if (b.weight <= 0) continue;
    if (x < b.weight) return b;
    x -= b.weight;
  }
  return backends.findLast((b) => b.weight > 0);
}
