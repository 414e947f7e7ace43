import { readFileSync } from 'node:fs';
import { appFile } from './app-root.ts';

/**
 * Outrigger's version, from the package.json that ships beside src/ and dist/ (the image copies
 * it too). Read once; "unknown" only if the file was removed.
 */
export const outriggerVersion: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(appFile('package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();
