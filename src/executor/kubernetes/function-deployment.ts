// The pods of one newdeploy function in kubernetes mode: a Deployment of its
// own (Fission's name, `newdeploy-<fn>-<ns>-<uid tail>`) whose generic pods
// the executor specializes one by one, as it does pool pods. The executor,
// not an HPA, sets its replicas: at least minScale, one more while requests
// outnumber requestsPerPod on every pod, at most maxScale; an idle pod is
// deleted and the replicas lowered with it. Scaling on concurrency, as
// local mode does, is what keeps a newdeploy function's pods specialized:
// an HPA would add and remove pods the executor did not choose. Replicas and
// template go out as a server-side apply only when they changed
// (apply-deployment.ts); pods are handed out from the namespace's pod watch
// (function-pods.ts). A pod handed out is annotated with the function version
// it is about to be specialized for, as a claimed pool pod is, so that the
// next executor (a failover, a restart) adopts it (adoption.ts) instead of
// replacing a warm pod.
import { createHash } from 'node:crypto';
import { FlintError } from '../../api/errors.ts';
import type { Environment, FunctionResource } from '../../api/kinds.ts';
import type { KubeClient, KubeObject } from '../../store/kube-client.ts';
import { SPECIALIZED_FOR } from './adoption.ts';
import { applyDeployment, DEPLOYMENTS } from './apply-deployment.ts';
import { type FunctionPods, isReady, PODS } from './function-pods.ts';
import { dnsName, genericPodTemplate } from './pool-deployment.ts';

export interface FunctionDeploymentOptions {
  client: KubeClient;
  namespace: string;
  fetcherImage: string;
  enableIstio: boolean;
  pods: FunctionPods;
}

export function isNewdeploy(fn: FunctionResource): boolean {
  return fn.spec.invokeStrategy?.executionStrategy?.executorType === 'newdeploy';
}

/** minScale..maxScale as Fission reads them: maxScale 0 (unset) means minScale; at least one pod may run. */
export function scaleBounds(fn: FunctionResource): { min: number; max: number } {
  const es = fn.spec.invokeStrategy?.executionStrategy;
  const min = Math.max(0, es?.minScale ?? 0);
  return { min, max: Math.max(1, min, es?.maxScale ?? 0) };
}

export function functionDeploymentName(fn: FunctionResource): string {
  return dnsName(`newdeploy-${fn.metadata.name}-${fn.metadata.namespace}-${fn.metadata.uid.slice(-17)}`);
}

/** Changes with the environment's spec, so pods of an older template are told apart (a rolling update replaces them). */
export function environmentHash(env: Environment): string {
  return createHash('sha256').update(JSON.stringify(env.spec)).digest('hex').slice(0, 16);
}

export function functionLabels(fn: FunctionResource, env: Environment): Record<string, string> {
  return {
    environmentHash: environmentHash(env),
    executorType: 'newdeploy',
    functionName: fn.metadata.name,
    functionNamespace: fn.metadata.namespace,
    functionUid: fn.metadata.uid,
    environmentName: env.metadata.name,
    environmentNamespace: env.metadata.namespace,
  };
}

export function functionDeployment(fn: FunctionResource, env: Environment, replicas: number, o: Pick<FunctionDeploymentOptions, 'namespace' | 'fetcherImage' | 'enableIstio'>): KubeObject {
  const labels = functionLabels(fn, env);
  const selector = { executorType: 'newdeploy', functionUid: fn.metadata.uid };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: functionDeploymentName(fn), namespace: o.namespace, labels },
    spec: {
      replicas,
      selector: { matchLabels: selector },
      // Fission's rolling update: an environment change replaces a fifth of the pods at a time.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '20%', maxUnavailable: '20%' } },
      template: genericPodTemplate(env, labels, o),
    },
  };
}

export class FunctionDeployments {
  readonly #o: FunctionDeploymentOptions;
  /** Pods handed to the executor, by name: never handed out twice. */
  readonly #taken = new Set<string>();

  constructor(o: FunctionDeploymentOptions) {
    this.#o = o;
  }

  /** Creates the function's Deployment, or brings its template and replicas to what is wanted; no write when they are. */
  async ensure(fn: FunctionResource, env: Environment, replicas: number): Promise<void> {
    await applyDeployment(this.#o.client, functionDeployment(fn, env, replicas, this.#o));
  }

  /**
   * A ready pod of the function not yet handed out, annotated with `version` (what it is about to be specialized
   * for); waits for one until the deadline. A pod whose annotation could not be written (changed meanwhile, or
   * deleted) is tried again once the watch shows it anew.
   */
  async takePod(fn: FunctionResource, env: Environment, version: string, deadline: number, stopped: () => boolean): Promise<{ name: string; ip: string }> {
    const labels = { executorType: 'newdeploy', functionUid: fn.metadata.uid, environmentHash: environmentHash(env) };
    const free = await this.#o.pods.waitFor(
      async () => {
        // A pod already annotated is another executor's: adopted (and so taken) or about to be deleted.
        const pods = this.#o.pods.list(labels).filter((p) => isReady(p) && !this.#taken.has(p.metadata.name) && !p.metadata.annotations?.[SPECIALIZED_FOR]);
        for (const pod of pods) {
          const name = pod.metadata.name as string;
          // Another waiter may have taken it while this one awaited a write.
          if (this.#taken.has(name)) continue;
          // Taken at once: other waiters look at the same change before this one's write returns.
          this.#taken.add(name);
          try {
            await this.#o.client.replace(PODS, this.#o.namespace, name, { ...pod, metadata: { ...pod.metadata, annotations: { ...pod.metadata.annotations, [SPECIALIZED_FOR]: version } } });
            return pod;
          } catch (err) {
            const code = (err as { code?: string }).code;
            if (code === 'FLINT_ERR_CONFLICT' || code === 'FLINT_ERR_NOT_FOUND') {
              this.#taken.delete(name);
              continue;
            }
            // The write may have landed all the same: a pod marked for nobody would hold a replica of the function's
            // forever. Deleted, its Deployment makes a fresh one; it stays taken, never handed out while it goes.
            await this.#o.client.delete(PODS, this.#o.namespace, name).catch(() => {});
            throw err;
          }
        }
        return undefined;
      },
      deadline,
      stopped,
    );
    if (!free) {
      throw new FlintError('FLINT_ERR_SPECIALIZE_FAILED', `function '${fn.metadata.name}': no ready pod in its Deployment ${functionDeploymentName(fn)} within specializationTimeout`);
    }
    return { name: free.metadata.name, ip: free.status.podIP };
  }

  /** A pod an earlier executor specialized and this one adopted: never handed out again. */
  adopted(pod: string): void {
    this.#taken.add(pod);
  }

  /** The pod is gone (deleted by the executor): it may not be handed out again, and needs no memory. */
  forget(pod: string): void {
    this.#taken.delete(pod);
  }

  async remove(fn: FunctionResource): Promise<void> {
    await this.#o.client.delete(DEPLOYMENTS, this.#o.namespace, functionDeploymentName(fn));
  }

  /** Deployments of functions that no longer exist (deleted while the control plane was down). */
  async removeAllBut(keep: Set<string>): Promise<void> {
    const list = await this.#o.client.list<KubeObject>(DEPLOYMENTS, this.#o.namespace, { labelSelector: 'executorType=newdeploy' });
    for (const d of list.items) if (!keep.has(d.metadata.name)) await this.#o.client.delete(DEPLOYMENTS, this.#o.namespace, d.metadata.name);
  }
}
