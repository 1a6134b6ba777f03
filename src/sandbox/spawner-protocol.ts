// Messages between the server and its spawner process (spawner.ts), over
// Node's IPC channel with structured-clone serialization (Buffers pass as
// they are).

export type SpawnerRequest =
  | { op: 'spawn'; ref: number; argv: string[]; env: Record<string, string>; cwd: string }
  | { op: 'stdin-end'; ref: number };

export type SpawnerReply =
  | { op: 'spawned'; ref: number; pid: number }
  | { op: 'data'; ref: number; stream: 'stdout' | 'stderr'; data: Uint8Array }
  | { op: 'end'; ref: number; stream: 'stdout' | 'stderr' }
  | { op: 'error'; ref: number; message: string; code?: string }
  | { op: 'exit'; ref: number; code: number | null; signal: NodeJS.Signals | null }
  | { op: 'close'; ref: number };
