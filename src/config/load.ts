import { OutriggerError } from '../shared/errors.ts';
import {
  ANNOTATION_PREFIX,
  INJECTED_ANNOTATION,
  options,
  type Config,
  type OptionName,
  type OptionSpec,
} from './options.ts';
import { parseValue } from './parse.ts';
import { gatewayOptions } from './gateway-options.ts';
import { identityOptions } from './identity-options.ts';
import { iptablesOptions } from './iptables-options.ts';
import { webhookOptions } from './webhook-options.ts';
import { resolveValue, type TableSpec } from './resolve.ts';

export interface ConfigInputs {
  /** Raw flag values by option name; repeatable flags as arrays. */
  flags?: Partial<Record<OptionName, string | string[]>>;
  /** Values of the flags' old spellings (OptionSpec.was), by option name. */
  oldFlags?: Partial<Record<OptionName, string>>;
  env?: Record<string, string | undefined>;
  annotations?: Record<string, string>;
}

const names = Object.keys(options) as OptionName[];
/** The table viewed without per-option types, for code that walks every option. */
const specOf = (name: OptionName): OptionSpec<unknown> => options[name];

/**
 * Builds the configuration with precedence flag > env > annotation > default. Every value is
 * validated; the first invalid one throws config_invalid naming the key, the value and what is
 * allowed. Nothing is silently defaulted over a bad value.
 */
export function loadConfig(inputs: ConfigInputs): Config {
  checkAnnotations(inputs.annotations ?? {});
  const out: Record<string, unknown> = {};
  for (const name of names) out[name] = resolveOne(name, inputs);
  checkListenerPorts(out as Config);
  return out as Config;
}

const LISTENERS = ['egressPort', 'ingressPort', 'adminPort'] as const;

/** Two listeners on one port fail only at bind time, naming neither flag: refuse it up front. */
function checkListenerPorts(config: Config): void {
  LISTENERS.forEach((a, i) => {
    const b = LISTENERS.slice(i + 1).find((other) => config[other] === config[a]);
    if (b === undefined) return;
    const name = (n: OptionName): string => `${specOf(n).flag.split(' ')[0]} (${specOf(n).env})`;
    throw new OutriggerError(
      'config_invalid',
      `${name(a)} and ${name(b)} are both ${config[a]}: the egress, ingress and admin listeners need three different ports`,
    );
  });
}

function resolveOne(
  name: OptionName,
  { flags = {}, oldFlags = {}, env = {}, annotations = {} }: ConfigInputs,
): unknown {
  return resolveValue(specOf(name), { flag: flags[name], oldFlag: oldFlags[name], env, annotations });
}

/** Known annotation keys; an unknown key under our prefix is a typo, and typos must not pass silently. */
export const knownAnnotations: ReadonlySet<string> = new Set([
  INJECTED_ANNOTATION,
  ...names.flatMap((n) => {
    const ann = specOf(n).annotation;
    return ann ? [ann] : [];
  }),
]);

/** Validates every outrigger.dev/ annotation; shared by the webhook and the sidecar's start-up. */
export function checkAnnotations(annotations: Record<string, string>): void {
  for (const [key, value] of Object.entries(annotations)) {
    if (!key.startsWith(ANNOTATION_PREFIX)) continue;
    if (!knownAnnotations.has(key)) {
      throw new OutriggerError(
        'config_invalid',
        `unknown annotation ${key}=${JSON.stringify(value)}: allowed annotations are ${[...knownAnnotations].sort().join(', ')}`,
      );
    }
  }
  for (const name of names) {
    const spec = specOf(name);
    if (!spec.annotation) continue;
    const raw = annotations[spec.annotation];
    if (raw !== undefined) parseValue(spec.parser, spec.annotation, raw, 'annotation');
  }
}

/**
 * OUTRIGGER_* variables that are not options: the pod identity the injector sets from the downward
 * API, the webhook's own settings, and scripts/test-cluster's. Everything else under the prefix is
 * a typo.
 */
const NON_OPTION_ENV = [
  'OUTRIGGER_POD_NAME',
  'OUTRIGGER_POD_NAMESPACE',
  'OUTRIGGER_POD_IP',
  'OUTRIGGER_POD_SERVICE_ACCOUNT',
  'OUTRIGGER_NODE_NAME',
  'OUTRIGGER_CLUSTER_DIR',
  'OUTRIGGER_TESTBINS',
  'OUTRIGGER_NODE_NETNS',
];

/** Every table's variables, old spellings included (they draw a deprecation warning instead). */
const tableEnv = (table: Record<string, TableSpec<unknown>>): string[] =>
  Object.values(table).flatMap((s) => [s.env, ...(s.was?.env ? [s.was.env] : [])]);

export const knownEnv: ReadonlySet<string> = new Set([
  ...[options, gatewayOptions, identityOptions, webhookOptions, iptablesOptions].flatMap(tableEnv),
  ...NON_OPTION_ENV,
]);

/**
 * Unknown OUTRIGGER_* variables, each with the nearest known name. A warning, not an error: a
 * newer injector may set a variable an older sidecar image does not know yet, and that must not
 * stop the pod (an unknown annotation, checked at admission, is an error instead).
 */
export function unknownEnv(env: Record<string, string | undefined>): { name: string; nearest: string }[] {
  return Object.keys(env)
    .filter((k) => k.startsWith('OUTRIGGER_') && !knownEnv.has(k))
    .sort()
    .map((name) => ({ name, nearest: nearest(name, [...knownEnv]) }));
}

function nearest(word: string, candidates: string[]): string {
  let best = candidates[0] ?? '';
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

/** Levenshtein distance, one row at a time. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row.push(
        Math.min(
          (prev[j] ?? 0) + 1,
          (row[j - 1] ?? 0) + 1,
          (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
        ),
      );
    prev = row;
  }
  return prev[b.length] ?? 0;
}
