import type { Server } from 'node:net';

/**
 * server.listen as a promise. The wildcard '::' takes IPv4 and IPv6 on a dual-stack host; on a
 * host (or pod) with IPv6 disabled it fails, and the IPv4 wildcard is the right fallback rather
 * than a sidecar that never starts.
 */
export async function listenOn(server: Server, port: number, host: string): Promise<void> {
  try {
    await once(server, port, host);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (host !== '::' || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw e;
    await once(server, port, '0.0.0.0');
  }
}

function once(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
