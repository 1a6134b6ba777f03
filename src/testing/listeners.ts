// What the kernel says is listening: tests of listener groups count sockets
// the process itself cannot enumerate, and wait for its accept queues.
import fs from 'node:fs';

/** The listening TCP sockets on `port` (from /proc/net/tcp and tcp6), each with its accept queue's length. */
function listening(port: number): number[] {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const queues: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!fs.existsSync(table)) continue;
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // For a listening socket, rx_queue is how many connections wait in its accept queue.
      if (f[1]?.endsWith(hex) && f[3] === '0A') queues.push(Number.parseInt(f[4]?.split(':')[1] ?? '0', 16));
    }
  }
  return queues;
}

/** Listening TCP sockets on `port`. */
export function listenersOn(port: number): number {
  return listening(port).length;
}

/** Connections the kernel has made on `port` that the server has not accepted yet. */
export function acceptQueued(port: number): number {
  return listening(port).reduce((a, b) => a + b, 0);
}
