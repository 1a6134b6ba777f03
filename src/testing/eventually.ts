// Test support, below every layer: imported by tests and by components'
// testing helpers, never by production code. One way to wait for something
// that happens on its own time (a watch event, a log line, a consumer
// joining its group), so every test waits the same way and fails the same
// way: naming what it waited for and what it saw last.

/**
 * Polls `check` every `stepMs` until it returns a truthy value, and returns
 * that value. A check that throws counts as not yet. After `timeoutMs` it
 * fails with `what` and the last value or error. For waiting on the clock,
 * never for measuring it.
 */
export async function eventually<T>(check: () => T | Promise<T>, what: string, timeoutMs = 20_000, stepMs = 10): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${seen}`);
    }
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
