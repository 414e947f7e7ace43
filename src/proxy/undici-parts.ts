import { createRequire } from 'node:module';
import type * as Undici from 'undici';

/**
 * undici's entry point loads all of undici (fetch, WebSocket, caches, mocks, proxies: 1.3 MB of
 * source), which costs every sidecar ~3 MB of heap and ~12 MB resident; the proxy uses its Pool
 * and its TCP connector only, so it loads those two files. The version is pinned in the lockfile;
 * test/unit/proxy/undici-parts.test.ts checks they are the entry point's own.
 */
const require = createRequire(import.meta.url);

export const Pool = require('undici/lib/dispatcher/pool.js') as typeof Undici.Pool;
export type Pool = Undici.Pool;
export const buildConnector = require('undici/lib/core/connect.js') as typeof Undici.buildConnector;
export type Connector = Undici.buildConnector.connector;
