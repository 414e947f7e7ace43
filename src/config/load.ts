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

export interface ConfigInputs {
  /** Raw flag values by option name; repeatable flags as arrays. */
  flags?: Partial<Record<OptionName, string | string[]>>;
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
  return out as Config;
}

function resolveOne(name: OptionName, { flags = {}, env = {}, annotations = {} }: ConfigInputs): unknown {
  const spec = specOf(name);
  const flag = flags[name];
  if (flag !== undefined) {
    const raw = Array.isArray(flag) ? flag.join(',') : flag;
    return parseValue(spec.parser, spec.flag.split(' ')[0] ?? name, raw, 'flag');
  }
  const fromEnv = env[spec.env];
  if (fromEnv !== undefined && fromEnv !== '')
    return parseValue(spec.parser, spec.env, fromEnv, 'environment variable');
  if (spec.annotation !== undefined) {
    const fromAnn = annotations[spec.annotation];
    if (fromAnn !== undefined) return parseValue(spec.parser, spec.annotation, fromAnn, 'annotation');
  }
  return spec.default;
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
