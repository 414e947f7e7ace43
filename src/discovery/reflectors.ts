import { Recovery } from './recovery.ts';
import { Reflector, type ReflectorOptions, type ReflectorSink } from './reflector.ts';

/** The reflector settings a component passes through from its options (tests shorten them). */
export type ReflectorTuning = Pick<
  ReflectorOptions,
  'backoff' | 'watchTimeoutS' | 'listTimeoutMs' | 'inactivityMs' | 'recoverySpreadMs' | 'relistSpreadMs'
>;

export type NewReflector = (
  name: string,
  path: string,
  selectors: Record<string, string>,
  sink: ReflectorSink,
) => Reflector;

/**
 * Makes the reflectors of one component (the resolver, the gateway's store): one API connection,
 * one tuning, and one Recovery, so that the first watch to get through after an outage wakes the
 * component's others.
 */
export function reflectorsOf(
  o: Pick<ReflectorOptions, 'api' | 'clock' | 'random' | 'logger'> & { reflector?: ReflectorTuning },
): NewReflector {
  const { api, clock, random, logger } = o;
  const recovery = new Recovery();
  return (name, path, selectors, sink) =>
    new Reflector({ name, path, selectors, sink, api, clock, random, logger, recovery, ...o.reflector });
}
