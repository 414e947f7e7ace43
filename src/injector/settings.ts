import { checkAnnotations } from '../config/load.ts';
import { options, type Config, type OptionName, type OptionSpec } from '../config/options.ts';
import { parseValue } from '../config/parse.ts';

/** Namespaces that are never injected, whatever their labels say (security.md section 1). */
export const SYSTEM_NAMESPACES: readonly string[] = ['kube-system', 'kube-public', 'kube-node-lease'];

export interface InjectorSettings {
  /** Mesh-wide defaults: the injector's own flags and environment over the built-in defaults. */
  defaults: Config;
  /** Never injected: the system namespaces and the webhook's own (it must start without itself). */
  ignoredNamespaces: readonly string[];
  /** Written into the injected-status annotation, so an operator can tell which injector ran. */
  version: string;
}

export function injectorSettings(
  defaults: Config,
  ownNamespace?: string,
  version = '0.1.0',
): InjectorSettings {
  const ignored = [...SYSTEM_NAMESPACES, ...(ownNamespace ? [ownNamespace] : [])];
  return { defaults, ignoredNamespaces: ignored, version };
}

const names = Object.keys(options) as OptionName[];

/**
 * The configuration one pod gets: its outrigger.dev/ annotations over the mesh-wide defaults.
 * For the injector a pod annotation must beat the webhook's flags (the opposite of the sidecar's
 * flag > annotation order, where flags are per pod). Validation is the sidecar's own
 * checkAnnotations, so a pod the webhook admits always passes the sidecar's start-up check.
 */
export function podConfig(defaults: Config, annotations: Record<string, string>): Config {
  checkAnnotations(annotations);
  const out: Record<string, unknown> = { ...defaults };
  for (const name of names) {
    const spec: OptionSpec<unknown> = options[name];
    const raw = spec.annotation === undefined ? undefined : annotations[spec.annotation];
    if (spec.annotation !== undefined && raw !== undefined)
      out[name] = parseValue(spec.parser, spec.annotation, raw, 'annotation');
  }
  return out as Config;
}
