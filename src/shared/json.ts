/**
 * Readers for parsed JSON of unknown shape (API objects, watch events): each answers the value
 * when it has the expected type and a neutral value otherwise, so slimming never throws on a
 * field that is missing or of the wrong type.
 */
export type Json = Record<string, unknown>;

export const obj = (v: unknown): Json => (v !== null && typeof v === 'object' ? (v as Json) : {});
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
export const num = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const bool = (v: unknown): boolean | null | undefined =>
  typeof v === 'boolean' ? v : v === null ? null : undefined;

/** The string-valued entries of a map such as labels; others are dropped. */
export const strMap = (v: unknown): Record<string, string> =>
  Object.fromEntries(Object.entries(obj(v)).flatMap(([k, x]) => (typeof x === 'string' ? [[k, x]] : [])));
