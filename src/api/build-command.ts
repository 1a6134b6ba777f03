// A build command is a program and its arguments split on whitespace, run
// without a shell (as Fission's builder does): shell syntax in it would
// silently mean something else, so it is refused where it is declared.
const SHELL_METACHARACTERS = [';', '|', '&', '`', '$', '(', ')', '<', '>', '\n', '\r'];

/** The problem with `command`, or undefined when it is usable. */
export function buildCommandProblem(command: string): string | undefined {
  if (command.trim() === '') return 'must not be empty';
  const bad = SHELL_METACHARACTERS.find((c) => command.includes(c));
  if (bad) return `contains shell metacharacter ${JSON.stringify(bad)}: a build command runs without a shell; put shell logic in a script in the source and run that`;
  return undefined;
}

export function splitBuildCommand(command: string): string[] {
  return command.trim().split(/\s+/);
}

/** The command a builder runs when neither the package nor the environment names one. */
export const DEFAULT_BUILD_COMMAND = 'build';

/** Where an uploaded archive lives on the control plane; packages refer to it by this URL. */
export const ARCHIVE_URL_PREFIX = '/v1/archives/';
export const SHA256_HEX = /^[0-9a-f]{64}$/;

/** The sha256 of an archive stored on this control plane, from its URL; undefined for other URLs. */
export function storedArchiveSha(url: string): string | undefined {
  if (!url.startsWith(ARCHIVE_URL_PREFIX)) return undefined;
  const sha = url.slice(ARCHIVE_URL_PREFIX.length);
  return SHA256_HEX.test(sha) ? sha : undefined;
}

/** Archives larger than this are uploaded, not embedded in the package (as Fission does). */
export const MAX_LITERAL_BYTES = 256 * 1024;
