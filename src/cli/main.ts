// Entry of the `flint` command: runs one command line, prints failures as
// one `Error: ...` line on stderr and returns the exit code from the error
// registry (0 on success).
import { CommanderError } from 'commander';
import { ErrorCodes, isErrorCode } from '../api/errors.ts';
import { type Io, processIo } from './io.ts';
import { buildProgram } from './program.ts';

export async function main(argv: string[], io: Io = processIo()): Promise<number> {
  const program = await buildProgram(io, argv);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') return 0;
      if (err.code === 'commander.executeSubCommandAsync') return err.exitCode;
      const message = err.message.replace(/^error:\s*/i, '');
      io.err(`Error: ${message}${err.code === 'commander.unknownCommand' || err.code === 'commander.unknownOption' ? " (see 'flint --help')" : ''}\n`);
      return ErrorCodes.FLINT_ERR_USAGE.exit;
    }
    const e = err as { code?: unknown; message?: string; stack?: string };
    io.err(`Error: ${e?.message ?? String(err)}\n`);
    if (io.env.FLINT_DEBUG) io.err(`${e?.stack}\n`);
    return isErrorCode(e?.code) ? ErrorCodes[e.code].exit : 1;
  }
}
