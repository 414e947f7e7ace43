/**
 * The drain's question "has the app gone?", asked of its ports: egress keeps serving while the app
 * can still send (docs/data-path.md, drain on SIGTERM).
 */
import { connect } from 'node:net';

/** The app has gone when none of its ports accepts a connection any more. */
export async function appGone(hosts: readonly string[], ports: readonly number[]): Promise<boolean> {
  const open = await Promise.all(hosts.flatMap((host) => ports.map((port) => accepts(host, port))));
  return !open.some(Boolean);
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setTimeout(500, () => {
      s.destroy();
      resolve(true);
    });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
