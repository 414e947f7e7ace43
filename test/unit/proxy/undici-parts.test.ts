import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { it } from 'node:test';
import type * as Undici from 'undici';
import { buildConnector, Pool } from '../../../src/proxy/undici-parts.ts';

it("the proxy's undici parts are the ones undici's entry point exports", () => {
  const undici = createRequire(import.meta.url)('undici') as typeof Undici;
  assert.equal(Pool, undici.Pool);
  assert.equal(buildConnector, undici.buildConnector);
});
