/**
 * Checks the JSON types of every part of a pod the injector reads or patches, so the mutation
 * itself can trust `PodLike`. A real API server never sends such shapes (it decodes into typed
 * objects first); a buggy or hostile client can, and deserves a 400 naming the field, not a crash.
 * Values are not checked here (a container without a name is the API server's to refuse).
 * Returns the first problem, or undefined when the shape is usable.
 */
export function podShapeProblem(pod: unknown, where: string): string | undefined {
  return first(
    () => objectProblem(pod, where),
    () => metadataProblem((pod as Record<string, unknown>).metadata, `${where}.metadata`),
    () => specProblem((pod as Record<string, unknown>).spec, `${where}.spec`),
  );
}

type Check = () => string | undefined;

function first(...checks: Check[]): string | undefined {
  for (const c of checks) {
    const p = c();
    if (p !== undefined) return p;
  }
  return undefined;
}

const typeName = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'a list' : typeof v);

function objectProblem(v: unknown, where: string): string | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? undefined
    : `${where} must be an object, not ${typeName(v)}`;
}

function optional(v: unknown, check: Check): string | undefined {
  return v === undefined ? undefined : check();
}

function typed(v: unknown, type: 'string' | 'boolean', where: string): string | undefined {
  return optional(v, () =>
    typeof v === type ? undefined : `${where} must be a ${type}, not ${typeName(v)}`,
  );
}

function stringMapProblem(v: unknown, where: string): string | undefined {
  return optional(v, () => {
    const p = objectProblem(v, where);
    if (p !== undefined) return p;
    for (const [k, value] of Object.entries(v as Record<string, unknown>))
      if (typeof value !== 'string')
        return `${where}[${JSON.stringify(k)}] must be a string, not ${typeName(value)}`;
    return undefined;
  });
}

/** A list of objects, each checked by `item`. */
function listProblem(
  v: unknown,
  where: string,
  item: (o: Record<string, unknown>, at: string) => string | undefined = () => undefined,
): string | undefined {
  if (!Array.isArray(v)) return `${where} must be a list, not ${typeName(v)}`;
  for (const [i, o] of v.entries()) {
    const at = `${where}[${i}]`;
    const p = objectProblem(o, at) ?? item(o as Record<string, unknown>, at);
    if (p !== undefined) return p;
  }
  return undefined;
}

function metadataProblem(v: unknown, where: string): string | undefined {
  return optional(v, () => {
    const m = v as Record<string, unknown>;
    return first(
      () => objectProblem(v, where),
      () => typed(m.name, 'string', `${where}.name`),
      () => typed(m.generateName, 'string', `${where}.generateName`),
      () => typed(m.namespace, 'string', `${where}.namespace`),
      () => stringMapProblem(m.labels, `${where}.labels`),
      () => stringMapProblem(m.annotations, `${where}.annotations`),
    );
  });
}

function specProblem(v: unknown, where: string): string | undefined {
  const s = v as Record<string, unknown>;
  return first(
    () => objectProblem(v, where),
    () => listProblem(s.containers, `${where}.containers`, containerProblem),
    () =>
      optional(s.initContainers, () =>
        listProblem(s.initContainers, `${where}.initContainers`, containerProblem),
      ),
    () => optional(s.volumes, () => listProblem(s.volumes, `${where}.volumes`)),
    () => typed(s.hostNetwork, 'boolean', `${where}.hostNetwork`),
    () => typed(s.restartPolicy, 'string', `${where}.restartPolicy`),
  );
}

function containerProblem(c: Record<string, unknown>, where: string): string | undefined {
  return first(
    () => typed(c.name, 'string', `${where}.name`),
    () => typed(c.restartPolicy, 'string', `${where}.restartPolicy`),
    () => optional(c.env, () => listProblem(c.env, `${where}.env`, envProblem)),
    () => optional(c.ports, () => listProblem(c.ports, `${where}.ports`, portProblem)),
  );
}

function envProblem(e: Record<string, unknown>, where: string): string | undefined {
  // Compared by name when the injector adds its own variables.
  return typeof e.name === 'string' ? undefined : `${where}.name must be a string, not ${typeName(e.name)}`;
}

function portProblem(p: Record<string, unknown>, where: string): string | undefined {
  if (!Number.isInteger(p.containerPort))
    return `${where}.containerPort must be an integer, not ${typeName(p.containerPort)}`;
  return typed(p.protocol, 'string', `${where}.protocol`);
}
