import type { IncomingMessage } from 'node:http';
import { requestView } from '../routes/action.ts';
import type { GatewayRouteTable, Scheme, Selected } from '../routes/table.ts';

/** The Gateway and listener port a request's pod port belongs to (its Gateway's own address). */
export interface Via {
  gateway: string;
  port: number;
}

export function matchHttpRoute(
  routes: GatewayRouteTable,
  scheme: Scheme,
  host: string,
  path: string,
  req: IncomingMessage,
  via?: Via,
): Selected | undefined {
  if (via) return routes.lookupListener(via.gateway, via.port, host, requestView(req, path));
  if (!routes.serves(scheme)) return undefined;
  return routes.lookup(scheme, host, requestView(req, path));
}
