// A pod specialized for a function (a claimed pool pod, or a pod of a
// newdeploy function's own Deployment) outlives the control plane that
// specialized it. The next control plane (after a restart, or in a helm
// upgrade, whose new pod starts beside the old one and takes its traffic
// over) adopts the pods still serving their function's current code instead
// of deleting them: the old one's requests under way on them finish, and the
// function's next call is warm. Fission's executor adopts its pods the same
// way (AdoptExistingResources). The claim (or, for a newdeploy pod, the
// hand-out) writes what the pod is being specialized for into an
// annotation; the pod's fetcher says whether that specialization finished. A pod of an older version, of a deleted function,
// or whose fetcher does not say `specialized` is deleted instead.
import { FETCHER_PORT } from './pool-deployment.ts';

/** On a claimed pool pod or a handed-out newdeploy pod: the function version (uid, resourceVersion, archive) it is specialized for. */
export const SPECIALIZED_FOR = 'flint.dev/specialized-for';

/**
 * The fetcher's account of its pod (`generic`, `specializing`, `specialized`, `failed`), asked at `host` (a pod's
 * address, or a Service's name); undefined when nothing answers there.
 */
export async function fetcherState(host: string, timeoutMs = 2000): Promise<string | undefined> {
  try {
    const res = await fetch(`http://${host}:${FETCHER_PORT}/healthz`, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.json()) as { state?: unknown };
    return res.status === 200 && typeof body.state === 'string' ? body.state : undefined;
  } catch {
    return undefined;
  }
}
