// The floor of any proxy written in Node, for `npm run bench`'s peer table:
// each client connection is piped, byte for byte, to a connection of its own
// to the upstream. No HTTP is parsed, nothing is routed, no connection is
// shared, so it is not a proxy a user could deploy: it is what the event
// loop, the stream layer and the two extra socket writes and reads per
// request cost on their own, which any Node proxy (the Flint router among
// them) pays before its first line of its own code. Prints the port it
// listens on, as the Go peer does.
import net from 'node:net';

const upstreamPort = Number(process.argv[2]);
if (!Number.isInteger(upstreamPort) || upstreamPort <= 0 || upstreamPort > 65535) {
  process.stderr.write(`usage: node main.ts <upstream port>, got '${process.argv[2] ?? ''}'\n`);
  process.exit(2);
}

const server = net.createServer((client) => {
  client.setNoDelay(true);
  const upstream = net.connect({ port: upstreamPort, host: '127.0.0.1', noDelay: true });
  client.pipe(upstream);
  upstream.pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close).on('close', close);
  upstream.on('error', close).on('close', close);
});
server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => {
  process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
