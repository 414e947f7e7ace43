// App stand-ins for transparent-mode end-to-end tests, run inside pod namespaces:
//   serve NAME PORTS [TCPPORTS]  HTTP servers answering JSON { pod, port, method, url, headers,
//                                remote } on each of PORTS (comma-separated), and raw TCP servers
//                                answering "PONG NAME <first line>" on each of TCPPORTS
//   get URL [HOST]               one HTTP GET (bounded: 10 s); prints { status, headers, body }
//   tcp HOST PORT LINE           writes LINE over raw TCP, prints the first line answered
import http from 'node:http';
import net from 'node:net';

function serve(name: string, ports: number[], tcpPorts: number[]): void {
  for (const port of tcpPorts) {
    net
      .createServer((sock) => {
        sock.on('error', () => undefined);
        sock.once('data', (d: Buffer) => sock.end(`PONG ${name} ${d.toString('latin1').trim()}\n`));
      })
      .listen({ port, host: '::' });
  }
  let ready = 0;
  for (const port of ports) {
    const server = http.createServer((req, res) => {
      const body = JSON.stringify({
        pod: name,
        port,
        method: req.method,
        url: req.url,
        headers: req.headers,
        remote: req.socket.remoteAddress,
        local: req.socket.localAddress,
      });
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
    server.listen({ port, host: '::' }, () => {
      if (++ready === ports.length) process.stdout.write('listening\n');
    });
  }
}

function get(url: string, host?: string): void {
  const req = http.get(url, { headers: host ? { host } : {}, timeout: 10_000, agent: false }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => (body += c));
    res.on('end', () =>
      process.stdout.write(JSON.stringify({ status: res.statusCode, headers: res.headers, body }) + '\n'),
    );
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  });
}

function tcp(host: string, port: number, line: string): void {
  const sock = net.connect({ host, port, timeout: 10_000 }, () => sock.write(`${line}\n`));
  let got = '';
  sock.setEncoding('utf8');
  sock.on('data', (d: string) => {
    got += d;
    if (got.includes('\n')) {
      process.stdout.write(got.split('\n')[0] + '\n');
      sock.destroy();
    }
  });
  sock.on('timeout', () => sock.destroy(new Error('timeout')));
  sock.on('error', (e) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  });
}

const [mode, a = '', b = '', c = ''] = process.argv.slice(2);
const list = (s: string): number[] => s.split(',').filter(Boolean).map(Number);
if (mode === 'serve') serve(a, list(b), list(c));
else if (mode === 'get') get(a, b || undefined);
else if (mode === 'tcp') tcp(a, Number(b), c);
else {
  process.stderr.write(
    'usage: capture-app serve NAME PORTS [TCPPORTS] | get URL [HOST] | tcp HOST PORT LINE\n',
  );
  process.exit(64);
}
