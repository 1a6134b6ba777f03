// `flint topic produce|read`: the CLI side of the controller's topic
// read-back endpoint, to try and verify message-queue triggers.
import type { Command } from 'commander';
import { FlintError } from '../../api/errors.ts';
import { usage } from '../flags.ts';
import type { Ctx } from '../io.ts';

const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

function topicName(t: string): string {
  if (!TOPIC.test(t) || t === '.' || t === '..') throw usage(`--topic '${t}' is not a valid topic name: use letters, digits, '.', '_' and '-'`);
  return t;
}

export function registerTopic(topic: Command, ctx: () => Ctx): void {

  topic
    .command('produce')
    .description('Send one message to a topic')
    .requiredOption('--topic <topic>', 'topic name')
    .requiredOption('--value <text>', 'message body')
    .option('--key <key>', 'message key')
    .action(async (f: { topic: string; value: string; key?: string }) => {
      const c = ctx();
      await (await c.client().raw('POST', `/topics/${topicName(f.topic)}/messages`, { key: f.key ?? null, value: f.value })).text();
      c.io.out(`message sent to '${f.topic}'\n`);
    });

  topic
    .command('read')
    .description("Print the group's next message on a topic (waits about 3 s)")
    .requiredOption('--topic <topic>', 'topic name')
    .option('--group <group>', 'consumer group: each group reads every message once', 'flint-cli')
    .option('--json', 'print {key, value, partition, offset} with the value base64-encoded')
    .action(async (f: { topic: string; group: string; json?: boolean }) => {
      const c = ctx();
      const res = await c.client().raw('GET', `/topics/${topicName(f.topic)}/messages?group=${encodeURIComponent(f.group)}`).catch((err) => {
        if ((err as { code?: string }).code === 'FLINT_ERR_LONG_POLL_TIMEOUT') return undefined;
        throw err;
      });
      if (!res) throw new FlintError('FLINT_ERR_LONG_POLL_TIMEOUT', `no new message on '${f.topic}' for group '${f.group}'`);
      const m = (await res.json()) as { key: string | null; value: string; partition: number; offset: number };
      if (f.json) c.io.out(`${JSON.stringify(m)}\n`);
      else c.io.out(`${Buffer.from(m.value, 'base64').toString('utf8')}\n`);
    });
}
