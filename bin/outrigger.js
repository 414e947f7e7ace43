#!/usr/bin/env node
// Runs the compiled CLI (npm ci builds dist/ through the prepare script).
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `outrigger: Node.js 24 or newer is required, this is ${process.version}. ` +
      'Run it through npm (npx outrigger ...), which puts the pinned Node 24 from node_modules/.bin first on PATH.\n',
  );
  process.exit(1);
}
await import('../dist/main.js');
