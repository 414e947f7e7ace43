import type * as Http from 'node:http';
import { createRequire } from 'node:module';

/**
 * node:http through require, not import: an ESM import of a built-in reads all of its exports, and
 * node:http's WebSocket, CloseEvent and MessageEvent getters then load the undici bundled in Node
 * (fetch and WebSocket, ~0.8 MB of source) into every process, ~1.5 MB resident in a sidecar
 * that never uses them. Lint sends value imports of node:http here.
 */
const http = createRequire(import.meta.url)('node:http') as typeof Http;

export const { Agent, createServer, request } = http;
