import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The directory holding Outrigger's package.json, proto/ and manifests/: the nearest one above
 * this module whose package.json is Outrigger's. Found by walking up, not at a fixed depth, because
 * the same code runs from src/shared/, from tsc's dist/shared/ and from a bundle's chunk in dist/.
 */
export const appRoot: string = findRoot(import.meta.dirname);

/** A file shipped with Outrigger, by its path from the package root ('proto/...', 'manifests/...'). */
export const appFile = (relative: string): string => join(appRoot, relative);

function findRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (packageName(join(dir, 'package.json')) === 'outrigger') return dir;
    // Not found (files removed from an install): where the unbundled layout puts it.
    if (dirname(dir) === dir) return join(from, '../..');
  }
}

function packageName(file: string): unknown {
  try {
    return (JSON.parse(readFileSync(file, 'utf8')) as { name?: unknown }).name;
  } catch {
    return undefined;
  }
}
