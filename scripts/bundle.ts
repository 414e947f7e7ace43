// Builds what ships: src/ bundled by esbuild into a few ES-module files instead of ~670 modules.
// A sidecar then holds less in its heap (V8 keeps every loaded module's source, and each module
// its own records): 2-5 MB less private memory under load and 4.5 MB less after it than tsc's
// file-per-module output; docs/benchmarks.md, "Memory". tsc still type-checks (npm run typecheck).
//
//   node scripts/bundle.ts [OUTDIR]        (default dist/; writes OUTDIR/main.js and its chunks)
//
// Entry points: main.js, and tracing's sdk.js, which src/tracing/index.ts loads by its path beside
// its own module at the first sampled span; code splitting gives both one copy of what they share
// (one @opentelemetry/api). The dynamic imports of src/ become chunks, loaded when their command
// runs, as before. What src/ loads with createRequire (undici's pool, protobufjs, koffi) stays in
// node_modules. Names are kept so that stack traces and error classes read as in the sources.
import { rmSync } from 'node:fs';
import path from 'node:path';
import { build, type Metafile } from 'esbuild';

const repo = path.resolve(import.meta.dirname, '..');

/** Returns what went in (metafile inputs are paths from the repository root, e.g. src/main.ts). */
export async function bundle(outdir: string): Promise<Metafile> {
  rmSync(outdir, { recursive: true, force: true });
  const { metafile } = await build({
    absWorkingDir: repo,
    entryPoints: { main: 'src/main.ts', sdk: 'src/tracing/sdk.ts' },
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    // CommonJS packages inside an ES-module bundle still call require() for Node's built-ins.
    banner: {
      js: "import { createRequire as __outriggerRequire } from 'node:module'; const require = __outriggerRequire(import.meta.url);",
    },
    minifyWhitespace: true,
    minifySyntax: true,
    keepNames: true,
    // Licence comments go to *.LEGAL.txt beside the chunks: V8 keeps a loaded file's whole text.
    legalComments: 'external',
    logLevel: 'warning',
    metafile: true,
  });
  return metafile;
}

if (import.meta.main) await bundle(path.resolve(process.argv[2] ?? path.join(repo, 'dist')));
