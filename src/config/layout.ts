// Where things live inside the data directory. One place, so the controller
// (which reads logs and archives) and the executor (which writes them) agree.
import path from 'node:path';

export interface DataLayout {
  root: string;
  /** The sqlite store. */
  db: string;
  /** Function logs: one file per function, `<logs>/<namespace>/<name>.log`. */
  logs: string;
  /** Per-instance working directories (sockets, code, secrets) of worker processes. */
  instances: string;
  /** Content-addressed archive storage. */
  archives: string;
  /** Unpacked deployment archives shared by the instances of one code version. */
  deployCache: string;
  /** Working directories of running builds. */
  builds: string;
  /** Per-builder caches kept between builds (npm, pip, go). */
  buildCache: string;
  /** Files only the owner may read (generated credentials). */
  private: string;
}

export function dataLayout(root: string): DataLayout {
  const abs = path.resolve(root);
  return {
    root: abs,
    db: path.join(abs, 'flint.db'),
    logs: path.join(abs, 'logs'),
    instances: path.join(abs, 'instances'),
    archives: path.join(abs, 'archives'),
    deployCache: path.join(abs, 'deploy-cache'),
    builds: path.join(abs, 'builds'),
    buildCache: path.join(abs, 'build-cache'),
    private: path.join(abs, 'private'),
  };
}

export function functionLogFile(layout: DataLayout, namespace: string, name: string): string {
  return path.join(layout.logs, namespace, `${name}.log`);
}
