// A backend "pod" for data-path e2e tests: answers every request with the address it listens on
// (and the request target it got in x-path).
// SIGTERM behaves like a well-behaved app during a rolling update: stop accepting, finish
// in-flight requests (telling keep-alive clients to close), then exit.
// usage: node data-path-backend.ts ADDRESS:PORT
import { createServer } from 'node:http';

const [host = '', portText = ''] = (process.argv[2] ?? '').split(/:(?=\d+$)/);
let stopping = false;
const server = createServer({ keepAliveTimeout: 30_000 }, (req, res) => {
  if (stopping) res.setHeader('connection', 'close');
  req.resume();
  res.setHeader('x-path', req.url ?? '');
  req.on('end', () => res.end(host));
});
server.listen(Number(portText), host, () => process.stdout.write(`listening ${host}:${portText}\n`));
process.on('SIGTERM', () => {
  stopping = true;
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  setTimeout(() => process.exit(0), 10_000).unref();
});
