/**
 * http-proxy 1.18.1 captures `util._extend` at load time and calls it on every request; Node 24
 * deprecates it (DEP0060), which prints a warning in every process that proxies. Replacing it with
 * its documented equivalent before http-proxy loads removes the warning and the deprecation
 * wrapper's per-call cost. Imported by forward.ts ahead of http-proxy (ESM evaluates in order).
 */
import util from 'node:util';

const extend = <T extends object>(target: T, source: object | null | undefined): T =>
  source === null || typeof source !== 'object' ? target : Object.assign(target, source);

(util as unknown as { _extend: typeof extend })._extend = extend;
