/**
 * Gateway API durations (GEP-2257): one to four `<number><unit>` parts, units h, m, s and ms, each
 * number of at most five digits, e.g. `10s`, `1h30m`, `500ms`. Answers milliseconds, or undefined
 * when the text is not such a duration. `0s` is a duration of zero: for a route timeout, none.
 */
const FORMAT = /^(?:[0-9]{1,5}(?:h|ms|m|s)){1,4}$/;
const PART = /([0-9]{1,5})(h|ms|m|s)/g;
const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };

export function parseDuration(text: string): number | undefined {
  if (!FORMAT.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(PART)) ms += Number(n) * UNIT_MS[unit!]!;
  return ms;
}
