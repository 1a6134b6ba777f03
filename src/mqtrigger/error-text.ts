// Broker client errors often wrap the reason: "createTopics failed 6 times"
// says nothing of a refused password. Logs get the causes too.

/** An error's message followed by the distinct messages of what caused it (`errors`, `cause`), at most `max` in all. */
export function errorText(err: unknown, max = 4): string {
  const parts: string[] = [];
  const walk = (e: unknown, depth: number): void => {
    if (e === null || e === undefined || depth > 4 || parts.length >= max) return;
    const message = (e instanceof Error ? e.message : String(e)).replace(/\.$/, '');
    if (message !== '' && !parts.includes(message)) parts.push(message);
    const nested = (e as { errors?: unknown }).errors;
    if (Array.isArray(nested)) for (const n of nested) walk(n, depth + 1);
    walk((e as { cause?: unknown }).cause, depth + 1);
  };
  walk(err, 0);
  return parts.join(': ');
}
