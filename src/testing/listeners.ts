// What the kernel says is listening: tests of listener groups count sockets
// the process itself cannot enumerate.
import fs from 'node:fs';

/** Listening TCP sockets on `port`, from /proc/net/tcp and tcp6. */
export function listenersOn(port: number): number {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let n = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!fs.existsSync(table)) continue;
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1]?.endsWith(hex) && f[3] === '0A') n++;
    }
  }
  return n;
}
