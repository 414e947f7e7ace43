/**
 * Parses a downward-API labels/annotations file: one `key="value"` per line, the value quoted and
 * escaped like a Go string (kubelet's fieldpath.FormatMap uses strconv.Quote).
 */
export function parsePodInfoFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    const quoted = line.slice(eq + 1).trim();
    out[key] = unquote(quoted);
  }
  return out;
}

function unquote(q: string): string {
  if (!q.startsWith('"') || !q.endsWith('"') || q.length < 2) return q;
  try {
    return JSON.parse(q) as string;
  } catch {
    // Go escapes such as \x7f are not JSON; keep the raw inner text rather than lose the key.
    return q.slice(1, -1);
  }
}
