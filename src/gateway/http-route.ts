import type { IncomingMessage } from 'node:http';
import { requestView } from '../routes/action.ts';
import type { GatewayRouteTable, Scheme, Selected } from '../routes/table.ts';

export function matchHttpRoute(
  routes: GatewayRouteTable,
  scheme: Scheme,
  host: string,
  path: string,
  req: IncomingMessage,
): Selected | undefined {
  if (!routes.serves(scheme)) return undefined;
  return routes.lookup(scheme, host, requestView(req, path));
}
