import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { usableCpus } from '../sandbox/cpu-affinity.ts';
import { loadValues } from './values.ts';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

function tmpFile(text: string): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'flint-values-'));
  dirs.push(d);
  const f = path.join(d, 'v.yaml');
  fs.writeFileSync(f, text);
  return f;
}

async function refuses(src: Parameters<typeof loadValues>[0], pattern: RegExp): Promise<void> {
  await assert.rejects(loadValues(src), (err: any) => {
    assert.equal(err.code, 'FLINT_ERR_CONFIG');
    assert.match(err.message, pattern);
    return true;
  });
}

describe('install values', () => {
  it('embedded defaults hold every key of the design', async () => {
    const v = await loadValues();
    assert.equal(v.authentication.enabled, false);
    assert.equal(v.authentication.authUriPath, '/auth/login');
    assert.equal(v.authentication.authUsername, 'admin');
    assert.equal(v.authentication.jwtExpiryTime, 120);
    assert.equal(v.authentication.jwtIssuer, 'flint');
    assert.equal(v.enableIstio, false);
    assert.equal(typeof v.kafka.brokers, 'string');
    assert.equal(typeof v.controller.port, 'number');
    assert.equal(typeof v.router.port, 'number');
    assert.equal(v.controller.acceptSockets, 16);
    assert.equal(v.router.acceptSockets, 64);
    assert.equal(v.ingress.acceptSockets, 64);
    assert.equal(typeof v.ingress.port, 'number');
    assert.equal(typeof v.dataDir, 'string');
  });

  it('-f files then --set override in order, with types coerced', async () => {
    const f = tmpFile('router:\n  port: 9000\nauthentication:\n  enabled: true\n');
    const v = await loadValues({ files: [f], sets: ['router.port=9001', 'authentication.jwtExpiryTime=2', 'dataDir=/tmp/x'] });
    assert.equal(v.router.port, 9001);
    assert.equal(v.authentication.enabled, true);
    assert.equal(v.authentication.jwtExpiryTime, 2);
    assert.equal(v.dataDir, '/tmp/x');
  });

  it('refuses unknown keys and wrong types, naming the key', async () => {
    await refuses({ sets: ['router.prot=1'] }, /unknown install value 'router\.prot'/);
    await refuses({ sets: ['nope=1'] }, /unknown install value 'nope'/);
    await refuses({ sets: ['router.port=abc'] }, /'router\.port' must be an integer/);
    await refuses({ sets: ['router.port=70000'] }, /'router\.port' must be at most 65535/);
    await refuses({ sets: ['authentication.enabled=yes'] }, /'authentication\.enabled' must be true or false/);
    await refuses({ sets: ['executor.sandbox=docker'] }, /'executor\.sandbox' must be one of/);
    await refuses({ sets: ['executor.poolSize=-1'] }, /'executor\.poolSize' must be at least 0/);
    await refuses({ sets: ['executor.poolSize=1001'] }, /'executor\.poolSize' must be at most 1000/);
    await refuses({ sets: ['executor.poolSize=two'] }, /'executor\.poolSize' must be an integer/);
    await refuses({ sets: ['executor.concurrentStarts=-1'] }, /'executor\.concurrentStarts' must be at least 0/);
    await refuses({ sets: ['executor.concurrentStarts=1.5'] }, /'executor\.concurrentStarts' must be an integer/);
    await refuses({ sets: ['executor.firstCallWindowSeconds=-1'] }, /'executor\.firstCallWindowSeconds' must be at least 0/);
    await refuses({ sets: ['executor.firstCallWindowSeconds=86401'] }, /'executor\.firstCallWindowSeconds' must be at most 86400/);
    await refuses({ sets: ['executor.firstCallWindowSeconds=soon'] }, /'executor\.firstCallWindowSeconds' must be an integer/);
    await refuses({ sets: ['router=1'] }, /'router' is a map/);
    // Each socket of a listener group is an open file and a net.Server: a typo must not open a million.
    await refuses({ sets: ['router.acceptSockets=0'] }, /'router\.acceptSockets' must be at least 1/);
    await refuses({ sets: ['controller.acceptSockets=0'] }, /'controller\.acceptSockets' must be at least 1/);
    await refuses({ sets: ['controller.acceptSockets=2000'] }, /'controller\.acceptSockets' must be at most 1024/);
    await refuses({ sets: ['ingress.acceptSockets=1000000'] }, /'ingress\.acceptSockets' must be at most 1024/);
    await refuses({ sets: ['router.acceptSockets=1.5'] }, /'router\.acceptSockets' must be an integer/);
    await refuses({ sets: ['noequals'] }, /--set needs key=value/);
    await refuses({ files: [tmpFile('router:\n  port: "x"\n')] }, /'router\.port' must be an integer/);
    await refuses({ files: [tmpFile('bogus: 1\n')] }, /unknown install value 'bogus'/);
    await refuses({ files: [tmpFile('a: [\n')] }, /not valid YAML/);
    await refuses({ files: ['/nonexistent/values.yaml'] }, /cannot read values file/);
    await refuses({ sets: ['enableIstio=true'] }, /'enableIstio' needs mode=kubernetes/);
    // CPU lists go to taskset as one argument: nothing but digits, commas and dashes, and CPUs this machine has.
    await refuses({ sets: ['router.cpus=0;reboot'] }, /'router\.cpus' has a bad value/);
    await refuses({ sets: ['router.cpus=2-1'] }, /'router\.cpus' has a range that runs backwards: 2-1/);
    await refuses({ sets: ['executor.workerCpus=99999'] }, /'executor\.workerCpus' names CPU 99999, which this process cannot use/);
    await refuses({ sets: ['mode=kubernetes', `router.cpus=${usableCpus()[0]}`] }, /'router\.cpus' is for local mode/);
  });

  it('takes CPU lists this machine has', async () => {
    const cpu = String(usableCpus()[0]);
    const v = await loadValues({ sets: [`router.cpus=${cpu}`, `executor.workerCpus=${cpu}`] });
    assert.equal(v.router.cpus, cpu);
    assert.equal(v.executor.workerCpus, cpu);
    assert.equal((await loadValues({})).router.cpus, '');
  });
});
