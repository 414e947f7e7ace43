// The benchmark runs what ships: compiled JavaScript, not the TypeScript sources (Node's type
// stripping loads a WebAssembly transformer that alone adds ~18 MB RSS to a process). The build
// goes under the repository's git-ignored .outrigger/ (one directory per run, removed at exit) so
// that the compiled files still resolve the installed packages.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import path from 'node:path';

const repo = path.resolve(import.meta.dirname, '../..');
const out = path.join(repo, '.outrigger', `bench-build-${process.pid}`);

export interface BenchBuild {
  /** Entry point of the outrigger CLI. */
  main: string;
  /** The Node peer proxies (raw, http-proxy, undici). */
  nodeProxies: string;
}

export function sourcesBuild(): BenchBuild {
  return {
    main: path.join(repo, 'src/main.ts'),
    nodeProxies: path.join(repo, 'scripts/bench/node-proxies.ts'),
  };
}

/**
 * Builds `src` of a checkout (the repository, or an exported ref under it) into `dest/dist`: with
 * the checkout's own scripts/bundle.ts when it has one (what ships), else tsc, file per module.
 */
function compile(root: string, dest: string): void {
  const bundler = path.join(root, 'scripts/bundle.ts');
  const args = existsSync(bundler)
    ? [bundler, path.join(dest, 'dist')]
    : [
        path.join(repo, 'node_modules/typescript/bin/tsc'),
        '-p',
        path.join(root, 'tsconfig.build.json'),
        '--outDir',
        path.join(dest, 'dist'),
        '--sourceMap',
        'false',
      ];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 300_000 });
  // Type errors still emit JavaScript; only a build with nothing to run is fatal.
  if (r.status !== 0 && !existsSync(path.join(dest, 'dist/main.js')))
    throw new Error(`bench: build failed: ${r.stdout}${r.stderr}`);
  if (r.status !== 0)
    process.stderr.write(`bench: the build reported errors (JavaScript emitted anyway):\n${r.stdout}`);
}

export function compiledBuild(): BenchBuild {
  mkdirSync(out, { recursive: true });
  process.once('exit', () => rmSync(out, { recursive: true, force: true }));
  compile(repo, out);
  const proxies = path.join(out, 'node-proxies.mjs');
  const source = readFileSync(path.join(repo, 'scripts/bench/node-proxies.ts'), 'utf8');
  writeFileSync(proxies, stripTypeScriptTypes(source));
  return { main: path.join(out, 'dist/main.js'), nodeProxies: proxies };
}

/**
 * The sidecar as another git ref has it (e.g. `main`, for before/after rows in one run): its
 * `src` and build config exported next to this run's build, compiled against the installed
 * packages. Returns the CLI entry point.
 */
export function refBuild(ref: string): string {
  const dest = path.join(out, `ref-${ref.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(dest, { recursive: true });
  const wanted = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'scripts/bundle.ts'];
  // Older refs have no bundler: they are built with tsc.
  const files = wanted.filter(
    (f) => spawnSync('git', ['-C', repo, 'cat-file', '-e', `${ref}:${f}`]).status === 0,
  );
  const r = spawnSync(
    'bash',
    ['-c', 'git -C "$1" archive "$2" -- "${@:3}" | tar -x -C "$0"', dest, repo, ref, ...files],
    {
      encoding: 'utf8',
    },
  );
  if (r.status !== 0) throw new Error(`bench: cannot export ${ref}: ${r.stderr}`);
  compile(dest, dest);
  return path.join(dest, 'dist/main.js');
}
