// A gRPC backend "pod" for e2e tests: the TestService (test/harness/grpc.ts) on ADDRESS:PORT.
// SIGTERM shuts down gracefully like a gRPC server in a rolling update: GOAWAY to its clients,
// calls in flight (a long stream too) finish, then the process exits.
// usage: node grpc-backend.ts ADDRESS:PORT
import { startGrpcBackend } from './grpc.ts';

const address = process.argv[2] ?? '';
const backend = await startGrpcBackend(address);
process.stdout.write(`listening ${address}\n`);
process.on('SIGTERM', () => {
  void backend.close().then(() => process.exit(0));
  setTimeout(() => process.exit(0), 60_000).unref();
});
