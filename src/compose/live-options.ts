/**
 * The pod's downward-API files (annotations, labels) and the live options they carry: log level and
 * trace sampling are re-applied when kubelet rewrites the annotations file, without a restart.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, type ConfigInputs } from '../config/load.ts';
import { parsePodInfoFile } from '../config/podinfo.ts';
import { errorMessage } from '../shared/errors.ts';
import type { Logger, LogLevel } from '../shared/log.ts';

export const annotationsFile = (dir: string): string => join(dir, 'annotations');

/** One downward-API file as key/value pairs; a missing or unreadable file is empty. */
export function readPodFile(path: string): Record<string, string> {
  try {
    return parsePodInfoFile(readFileSync(path, 'utf8'));
  } catch {
    return {};
  }
}

/**
 * Re-applies the live options (log level, trace sampling) after the annotations file changed. The
 * whole configuration is validated again; an invalid change keeps the running values.
 */
export function applyLiveOptions(
  inputs: ConfigInputs,
  annotations: Record<string, string>,
  targets: { log: Logger; tracing: { setSampling(ratio: number): void } },
): boolean {
  try {
    const next = loadConfig({ ...inputs, annotations });
    targets.log.setLevel(next.logLevel as LogLevel);
    targets.tracing.setSampling(next.traceSampling);
    targets.log.info('live options re-applied', {
      logLevel: next.logLevel,
      traceSampling: next.traceSampling,
    });
    return true;
  } catch (e) {
    targets.log.warn('annotations changed but are invalid; keeping the running values', {
      error: errorMessage(e),
    });
    return false;
  }
}

/** Kubelet rewrites the downward-API files by swapping a ..data symlink: watch the directory. */
export function watchAnnotations(dir: string, log: Logger, onChange: () => void): FSWatcher | undefined {
  try {
    let timer: NodeJS.Timeout | undefined;
    const w = watch(dir, () => {
      clearTimeout(timer);
      timer = setTimeout(onChange, 100);
    });
    w.on('error', () => w.close());
    return w;
  } catch {
    log.debug('no pod info directory to watch', { dir });
    return undefined;
  }
}
