#!/usr/bin/env node
// Process edge only: argv -> CLI; errors -> exit codes. Everything else lives in cli/ and compose/.
import { buildCli } from './cli/index.ts';
import { isOutriggerError, errorMessage } from './shared/errors.ts';

try {
  await buildCli().parseAsync(process.argv);
} catch (e) {
  process.stderr.write(`outrigger: ${errorMessage(e)}\n`);
  process.exitCode = isOutriggerError(e, 'config_invalid') ? 2 : 1;
}
