import { parseAllDocuments, stringify } from 'yaml';
import { OutriggerError, isOutriggerError } from '../shared/errors.ts';
import { injectPod } from './mutate.ts';
import { applyPatch } from './patch.ts';
import { podShapeProblem } from './pod-shape.ts';
import type { InjectorSettings } from './settings.ts';
import type { NamespaceInfo, ObjectMeta, PodLike } from './types.ts';

type Doc = Record<string, unknown> & { kind?: string; metadata?: ObjectMeta; spec?: Record<string, unknown> };

export interface InjectManifestsOptions {
  settings: InjectorSettings;
  /** Namespace of objects that name none (kubectl's --namespace). */
  namespace: string;
  /** Labels of namespaces not defined in the input, e.g. a Pod Security enforce level. */
  namespaceLabels: Record<string, string>;
}

export interface InjectManifestsResult {
  output: string;
  /** One line per skipped or warned object, for stderr. */
  notes: string[];
}

/** Where each workload kind keeps its pod template. */
const TEMPLATE_PATHS = new Map<string, string[]>(
  Object.entries({
    Pod: [],
    Deployment: ['spec', 'template'],
    ReplicaSet: ['spec', 'template'],
    StatefulSet: ['spec', 'template'],
    DaemonSet: ['spec', 'template'],
    Job: ['spec', 'template'],
    ReplicationController: ['spec', 'template'],
    CronJob: ['spec', 'jobTemplate', 'spec', 'template'],
  }),
);

/**
 * `outrigger inject -f`: the webhook's mutation applied offline to every pod template in a
 * multi-document YAML stream. Other objects pass through unchanged. Namespaces defined in the
 * same stream lend their labels, so a restricted namespace gets explicit mode here too.
 */
export function injectManifests(text: string, opts: InjectManifestsOptions): InjectManifestsResult {
  const docs = parseAllDocuments(text).map((d, i) => {
    if (d.errors.length > 0)
      throw new OutriggerError('config_invalid', `invalid YAML: ${d.errors[0]?.message}`);
    const js = d.toJS() as unknown;
    // An empty document (a trailing ---) is nothing; a scalar or a list is not an object.
    if (js !== null && (typeof js !== 'object' || Array.isArray(js)))
      throw new OutriggerError(
        'config_invalid',
        `document ${i + 1} is ${JSON.stringify(js).slice(0, 60)}, not a Kubernetes object (a mapping with kind)`,
      );
    return js as Doc | null;
  });
  const namespaces = new Map<string, Record<string, string>>();
  for (const d of docs)
    if (d?.kind === 'Namespace' && d.metadata?.name) namespaces.set(d.metadata.name, d.metadata.labels ?? {});
  const notes: string[] = [];
  const out = docs
    .filter((d): d is Doc => d !== null && typeof d === 'object')
    .map((d) => injectDoc(d, opts, namespaces, notes));
  return { output: out.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'), notes };
}

function injectDoc(
  doc: Doc,
  opts: InjectManifestsOptions,
  namespaces: Map<string, Record<string, string>>,
  notes: string[],
): Doc {
  if (doc.kind === 'List' && Array.isArray(doc.items))
    return { ...doc, items: (doc.items as Doc[]).map((d) => injectDoc(d, opts, namespaces, notes)) };
  const path = doc.kind === undefined ? undefined : TEMPLATE_PATHS.get(doc.kind);
  if (path === undefined) return doc;
  const copy = structuredClone(doc);
  const template = path.reduce<Record<string, unknown> | undefined>(
    (o, k) => o?.[k] as Record<string, unknown> | undefined,
    copy,
  ) as PodLike | undefined;
  const ref = `${doc.kind?.toLowerCase()}/${doc.metadata?.name ?? '?'}`;
  if (!Array.isArray(template?.spec?.containers))
    throw new OutriggerError(
      'config_invalid',
      `${ref}: ${[...path, 'spec', 'containers'].join('.')} must be a list of containers, found ${JSON.stringify(template?.spec?.containers) ?? 'nothing'}`,
    );
  const problem = podShapeProblem(template, 'template');
  if (problem !== undefined) throw new OutriggerError('config_invalid', `${ref}: ${problem}`);
  const nsName = doc.metadata?.namespace ?? opts.namespace;
  const ns: NamespaceInfo = { name: nsName, labels: namespaces.get(nsName) ?? opts.namespaceLabels };
  try {
    const result = injectPod(template, ns, opts.settings);
    for (const w of result.warnings) notes.push(`${ref}: ${w}`);
    if (result.kind === 'skipped') {
      notes.push(`${ref}: not injected: ${result.reason}`);
      return doc;
    }
    const injected = applyPatch(template, result.patch);
    template.metadata = injected.metadata;
    template.spec = injected.spec;
    return copy;
  } catch (e) {
    if (isOutriggerError(e, 'config_invalid'))
      throw new OutriggerError('config_invalid', `${ref}: ${e.message}`);
    throw e;
  }
}
