#!/usr/bin/env -S node --max-semi-space-size=2
// Runs the compiled CLI (npm ci builds dist/ through the prepare script).
// --max-semi-space-size=2: V8's young generation otherwise grows to 64 MB under load; 2 MiB
// semi-spaces keep `outrigger proxy` at about 100-105 MB RSS under load instead of 140-160 MB,
// with less CPU per request than 1 MiB (which promotes more to the old generation); figures in
// docs/benchmarks.md, "Memory". `env -S` passes the flag on Linux and macOS.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `outrigger: Node.js 24 or newer is required, this is ${process.version}. ` +
      'Run it through npm (npx outrigger ...), which puts the pinned Node 24 from node_modules/.bin first on PATH.\n',
  );
  process.exit(1);
}
await import('../dist/main.js');
