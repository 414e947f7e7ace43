import { readFileSync } from 'node:fs';

/**
 * Outrigger's version, from the package.json that ships next to src/ and dist/ (the image copies
 * it too). Read once; "unknown" only if the file was removed.
 */
export const outriggerVersion: string = (() => {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
})();
