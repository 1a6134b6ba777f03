import type { Command } from 'commander';
import type { MessageQueueTrigger } from '../../api/kinds.ts';
import { noBrokerReason, usesInstallBroker } from '../../api/mq-brokers.ts';
import { MQ_TYPES, MQT_KINDS } from '../../api/names.ts';
import { checkName, collect, intFlag, kvMap, usage } from '../flags.ts';
import type { Ctx } from '../io.ts';
import { createOrSave, SpecOutput, type SpecOutputFlags, withSpecOutput } from '../spec/output.ts';
import { type ListOutputFlags, outputOption, printList, printObject, withListOutput } from '../output.ts';

interface MqtFlags {
  name: string;
  function?: string;
  mqtype?: string;
  topic?: string;
  resptopic?: string;
  errortopic?: string;
  maxretries?: number;
  contenttype?: string;
  metadata?: string[];
  secret?: string;
  mqtkind?: string;
  pollinginterval?: number;
  cooldownperiod?: number;
  minreplicacount?: number;
  maxreplicacount?: number;
}

const INT32_MAX = 2_147_483_647;

const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

function checkTopic(flag: string, t: string | undefined): void {
  if (t === undefined || t === '') return;
  if (!TOPIC.test(t) || t === '.' || t === '..') throw usage(`${flag} '${t}' is not a valid topic name: use letters, digits, '.', '_' and '-'`);
}

function addFlags(cmd: Command): Command {
  return cmd
    .option('--function <name>', 'function to call for each message')
    .option('--mqtype <type>', `message queue kind: ${MQ_TYPES.join(', ')}`)
    .option('--topic <topic>', 'topic to consume')
    .option('--resptopic <topic>', "topic that receives the function's answers")
    .option('--errortopic <topic>', 'topic that receives failures')
    .option('--maxretries <n>', 'retries after a failed call', intFlag('--maxretries', 0, 100))
    .option('--contenttype <type>', 'Content-Type of the call (default application/json)')
    .option('--metadata <key=value>', "connector settings (repeatable; 'key=' removes a key)", collect)
    .option('--secret <name>', "secret with connector credentials ('-' removes it)")
    .option('--mqtkind <kind>', `${MQT_KINDS.join(' or ')}: which of Fission's trigger heads owns it (kept; local mode consumes every trigger itself)`)
    .option('--pollinginterval <seconds>', 'KEDA: how often the queue is checked (kubernetes mode)', intFlag('--pollinginterval', 1, INT32_MAX))
    .option('--cooldownperiod <seconds>', 'KEDA: wait before scaling the connector to zero (kubernetes mode)', intFlag('--cooldownperiod', 0, INT32_MAX))
    .option('--minreplicacount <n>', 'KEDA: fewest connector replicas (kubernetes mode)', intFlag('--minreplicacount', 0, INT32_MAX))
    .option('--maxreplicacount <n>', 'KEDA: most connector replicas (kubernetes mode)', intFlag('--maxreplicacount', 1, INT32_MAX));
}

function apply(spec: Partial<MessageQueueTrigger['spec']>, f: MqtFlags): void {
  if (f.mqtype !== undefined) {
    if (!(MQ_TYPES as readonly string[]).includes(f.mqtype)) throw usage(`--mqtype must be one of ${MQ_TYPES.join(', ')}, got '${f.mqtype}'`);
    spec.messageQueueType = f.mqtype as MessageQueueTrigger['spec']['messageQueueType'];
  }
  if (f.function !== undefined) spec.functionref = { type: 'name', name: checkName('--function', f.function) };
  checkTopic('--topic', f.topic);
  checkTopic('--resptopic', f.resptopic);
  checkTopic('--errortopic', f.errortopic);
  if (f.topic !== undefined) spec.topic = f.topic;
  if (f.resptopic !== undefined) spec.respTopic = f.resptopic;
  if (f.errortopic !== undefined) spec.errorTopic = f.errortopic;
  if (spec.respTopic && spec.respTopic === spec.topic) throw usage('--resptopic must differ from --topic');
  if (spec.errorTopic && spec.errorTopic === spec.topic) throw usage('--errortopic must differ from --topic');
  if (f.maxretries !== undefined) spec.maxRetries = f.maxretries;
  if (f.contenttype !== undefined) spec.contentType = f.contenttype;
  const md = kvMap('--metadata', f.metadata, { allowEqualsInValue: true });
  if (md) {
    // An empty value takes a key away: no connector setting means anything empty.
    const next = { ...spec.metadata };
    for (const [k, v] of Object.entries(md)) {
      if (v === '') delete next[k];
      else next[k] = v;
    }
    if (Object.keys(next).length > 0) spec.metadata = next;
    else delete spec.metadata;
  }
  if (f.mqtkind !== undefined) {
    if (!(MQT_KINDS as readonly string[]).includes(f.mqtkind)) throw usage(`--mqtkind must be ${MQT_KINDS.join(' or ')}, got '${f.mqtkind}'`);
    spec.mqtkind = f.mqtkind as MessageQueueTrigger['spec']['mqtkind'];
  }
  if (f.pollinginterval !== undefined) spec.pollingInterval = f.pollinginterval;
  if (f.cooldownperiod !== undefined) spec.cooldownPeriod = f.cooldownperiod;
  if (f.minreplicacount !== undefined) spec.minReplicaCount = f.minreplicacount;
  if (f.maxreplicacount !== undefined) spec.maxReplicaCount = f.maxreplicacount;
  if (f.secret === '-') delete spec.secret;
  else if (f.secret !== undefined) spec.secret = checkName('--secret', f.secret);
}

/** The STATUS column: what the trigger manager last said, on one line. */
export function statusCell(t: MessageQueueTrigger): string {
  const s = t.status;
  if (s?.state === undefined) return 'pending';
  const message = (s.message ?? '').replace(/\s+/g, ' ').trim();
  return message === '' ? s.state : `${s.state}: ${message}`;
}

/**
 * Warns (on stderr: the trigger is stored all the same) when the server
 * configures no broker of the trigger's type and the trigger names no
 * server of its own: it waits until one is configured.
 */
async function warnWithoutBroker(c: Ctx, t: Pick<MessageQueueTrigger, 'spec'>): Promise<void> {
  const spec = t.spec;
  const configured = (await c.client().info().catch(() => undefined))?.messageQueueTypes;
  // A server that does not say which brokers it has: nothing to warn about.
  if (configured === undefined || configured.includes(spec.messageQueueType)) return;
  let secret: Record<string, string> | undefined;
  // A RabbitMQ secret may name the server (KEDA's TriggerAuthentication host).
  if (spec.messageQueueType === 'rabbitmq' && spec.secret && spec.metadata?.host === undefined) {
    secret = (await c.client().tryGet('Secret', c.namespace, spec.secret).catch(() => undefined))?.data;
  }
  if (!usesInstallBroker(spec, secret)) return;
  c.io.err(`Warning: this server has ${noBrokerReason(spec.messageQueueType)}; the trigger is stored and starts consuming once one is configured\n`);
}

export function registerMqt(mqt: Command, ctx: () => Ctx): void {

  withSpecOutput(addFlags(mqt.command('create').description('Create a message-queue trigger (warns on stderr if the server has no broker of its type)').requiredOption('--name <name>', 'trigger name'))).action(async (f: MqtFlags & SpecOutputFlags) => {
    const c = ctx();
    checkName('--name', f.name);
    if (!f.function) throw usage('need --function');
    if (!f.topic) throw usage('need --topic');
    const spec: Partial<MessageQueueTrigger['spec']> = { messageQueueType: 'kafka' };
    apply(spec, f);
    const obj = { kind: 'MessageQueueTrigger' as const, metadata: { name: f.name, namespace: c.namespace }, spec: spec as MessageQueueTrigger['spec'] };
    const out = SpecOutput.from(c, f);
    await createOrSave(c, out, obj, `mqtrigger-${f.name}`, `trigger '${f.name}' created\n`);
    if (out === undefined) await warnWithoutBroker(c, obj);
  });

  addFlags(mqt.command('update').description('Update a message-queue trigger').requiredOption('--name <name>', 'trigger name')).action(async (f: MqtFlags) => {
    const c = ctx();
    const cur = await c.client().get('MessageQueueTrigger', c.namespace, checkName('--name', f.name));
    apply(cur.spec, f);
    await c.client().update(cur);
    c.io.out(`trigger '${f.name}' updated\n`);
    await warnWithoutBroker(c, cur);
  });

  mqt
    .command('get')
    .description('Show a message-queue trigger and its status (state, last error and when)')
    .requiredOption('--name <name>', 'trigger name')
    .addOption(outputOption())
    .action(async (f: { name: string; output: string }) => {
      const c = ctx();
      await printObject(c.io, await c.client().get('MessageQueueTrigger', c.namespace, checkName('--name', f.name)), f.output);
    });

  withListOutput(mqt.command('list').description('List message-queue triggers and their STATUS (consuming, waiting, error)').option('-A, --all-namespaces', 'every namespace')).action(
    async (f: { allNamespaces?: boolean } & ListOutputFlags) => {
      const c = ctx();
      const items = await c.client().list('MessageQueueTrigger', f.allNamespaces ? undefined : c.namespace);
      await printList(c.io, items, f, {
        header: ['NAME', 'FUNCTION_NAME', 'MESSAGE_QUEUE_TYPE', 'TOPIC', 'RESPONSE_TOPIC', 'ERROR_TOPIC', 'MAX_RETRIES', 'PUB_MSG_CONTENT_TYPE', 'STATUS'],
        row: (t) => [
          t.metadata.name,
          t.spec.functionref.name,
          t.spec.messageQueueType,
          t.spec.topic,
          t.spec.respTopic,
          t.spec.errorTopic,
          t.spec.maxRetries ?? 0,
          t.spec.contentType ?? 'application/json',
          statusCell(t),
        ],
      });
    },
  );

  mqt
    .command('delete')
    .description('Delete a message-queue trigger')
    .requiredOption('--name <name>', 'trigger name')
    .action(async (f: { name: string }) => {
      const c = ctx();
      await c.client().delete('MessageQueueTrigger', c.namespace, checkName('--name', f.name));
      c.io.out(`trigger '${f.name}' deleted\n`);
    });
}
