#!/usr/bin/env -S node --max-semi-space-size=4
// Runs the bundled CLI (npm ci builds dist/ through the prepare script: scripts/bundle.ts).
// --max-semi-space-size=4: V8 would otherwise let the young generation grow to 64 MB under load;
// 4 MiB semi-spaces cost less CPU per request than 1 or 2 MiB (which promote more to the old
// generation) for no more memory under load; figures in docs/benchmarks.md, "Memory". `env -S`
// passes the flag on Linux and macOS.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `outrigger: Node.js 24 or newer is required, this is ${process.version}. ` +
      'Run it through npm (npx outrigger ...), which puts the pinned Node 24 from node_modules/.bin first on PATH.\n',
  );
  process.exit(1);
}
await import('../dist/main.js');
