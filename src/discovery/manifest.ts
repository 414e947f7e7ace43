import { parseAllDocuments } from 'yaml';
import { OutriggerError } from '../shared/errors.ts';
import type { KEndpointSlice, KService } from './objects.ts';
import { slimService, slimSlice } from './objects.ts';

export interface ParsedObjects {
  services: KService[];
  slices: KEndpointSlice[];
}

/**
 * Reads Service and EndpointSlice objects from YAML (or JSON) as `kubectl get -o yaml` prints
 * them: a `kind: List`, several documents, or both. Other kinds are skipped. Any syntax error
 * rejects the whole text: a half-read file must never become the desired state.
 */
export function parseObjects(text: string, defaultNamespace = 'default'): ParsedObjects {
  const out: ParsedObjects = { services: [], slices: [] };
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) {
      throw new OutriggerError('source_invalid', `invalid YAML: ${doc.errors[0]?.message ?? 'parse error'}`);
    }
    add(doc.toJS() as unknown, out, defaultNamespace);
  }
  return out;
}

function add(raw: unknown, out: ParsedObjects, ns: string): void {
  if (raw === null || typeof raw !== 'object') return;
  const o = raw as { kind?: unknown; items?: unknown };
  if (Array.isArray(o.items) && (o.kind === 'List' || String(o.kind).endsWith('List'))) {
    const itemKind =
      o.kind === 'ServiceList' ? 'Service' : o.kind === 'EndpointSliceList' ? 'EndpointSlice' : '';
    for (const item of o.items as unknown[]) {
      const withKind =
        itemKind && item && typeof item === 'object' && !('kind' in item)
          ? { ...item, kind: itemKind }
          : item;
      add(withKind, out, ns);
    }
    return;
  }
  if (o.kind === 'Service') out.services.push(slimService(raw, ns));
  else if (o.kind === 'EndpointSlice') out.slices.push(slimSlice(raw, ns));
}
