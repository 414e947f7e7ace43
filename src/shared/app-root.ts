import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

interface Found {
  dir: string;
  /** Outrigger's package.json, parsed; empty when it was not found. */
  pkg: { name?: unknown; version?: unknown };
}

/**
 * The directory holding Outrigger's package.json, proto/ and manifests/: the nearest one above
 * this module whose package.json is Outrigger's. Found by walking up, not at a fixed depth, because
 * the same code runs from src/shared/, from tsc's dist/shared/ and from a bundle's chunk in dist/.
 */
const found: Found = findRoot(import.meta.dirname);

/** A file shipped with Outrigger, by its path from the package root ('proto/...', 'manifests/...'). */
export const appFile = (relative: string): string => join(found.dir, relative);

/** Outrigger's version, from the package.json found above; "unknown" only if the file was removed. */
export const outriggerVersion: string = typeof found.pkg.version === 'string' ? found.pkg.version : 'unknown';

function findRoot(from: string): Found {
  for (let dir = from; ; dir = dirname(dir)) {
    const pkg = packageJson(join(dir, 'package.json'));
    if (pkg.name === 'outrigger') return { dir, pkg };
    // Not found (files removed from an install): where the unbundled layout puts it.
    if (dirname(dir) === dir) return { dir: join(from, '../..'), pkg: {} };
  }
}

function packageJson(file: string): Found['pkg'] {
  try {
    const pkg: unknown = JSON.parse(readFileSync(file, 'utf8'));
    return typeof pkg === 'object' && pkg !== null ? pkg : {};
  } catch {
    return {};
  }
}
