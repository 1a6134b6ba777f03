import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { HTTPTriggerSpec } from '../api/kinds.ts';
import { applyIngressFlags, parseAnnotation, parseAnnotations, parseIngressRule, parseIngressTls, routeListHost } from './flags.ts';

const usage = (re: RegExp) => (err: any) => {
  assert.equal(err.code, 'FLINT_ERR_USAGE');
  assert.match(err.message, re);
  return true;
};

const route = (extra: Partial<HTTPTriggerSpec> = {}): HTTPTriggerSpec => ({ relativeurl: '/hello', functionref: { type: 'name', name: 'hello' }, ...extra });

describe('ingress flags', () => {
  it('parses host=path rules', () => {
    assert.deepEqual(parseIngressRule('example.com=/foo/bar'), { host: 'example.com', path: '/foo/bar' });
    assert.deepEqual(parseIngressRule('*=/api/*'), { host: '*', path: '/api/*' });
    assert.deepEqual(parseIngressRule('*.Example.com=/x'), { host: '*.example.com', path: '/x' });
    assert.deepEqual(parseIngressRule('a.example.com=/users/{id:[0-9]+}'), { host: 'a.example.com', path: '/users/{id:[0-9]+}' });
    assert.equal(parseIngressRule('-'), null);
  });

  it('refuses bad rules with a clear message', () => {
    assert.throws(() => parseIngressRule('novalue'), usage(/--ingressrule 'novalue' is not host=path \(for example/));
    assert.throws(() => parseIngressRule('a=b=c'), usage(/'a=b=c' has more than one '='/));
    assert.throws(() => parseIngressRule('=/x'), usage(/the host is empty; use '\*' for any host/));
    assert.throws(() => parseIngressRule('example.com='), usage(/the path is empty/));
    assert.throws(() => parseIngressRule('example.com=foo'), usage(/must start with '\/'/));
    assert.throws(() => parseIngressRule('bad_host=/x'), usage(/'bad_host' is not '\*' or a DNS name/));
    assert.throws(() => parseIngressRule('a.com=/x/*/y'), usage(/'\*' is allowed only as a final/));
    assert.throws(() => parseIngressRule('a.com=/x/../y'), usage(/'\.\.'/));
    assert.throws(() => parseIngressRule('a.com=/u/{id'), usage(/unbalanced/));
    assert.throws(() => parseIngressRule(''), usage(/needs host=path/));
  });

  it('parses annotations and TLS', () => {
    assert.deepEqual(parseAnnotation('nginx.ingress.kubernetes.io/ssl-redirect=false'), ['nginx.ingress.kubernetes.io/ssl-redirect', 'false']);
    assert.deepEqual(parseAnnotation('empty='), ['empty', '']);
    assert.throws(() => parseAnnotation('novalue'), usage(/'novalue' is not key=value/));
    assert.throws(() => parseAnnotation('a=b=c'), usage(/more than one '='.*spec file/));
    assert.throws(() => parseAnnotation('=v'), usage(/key is empty/));
    assert.throws(() => parseAnnotation('bad key=v'), usage(/not a valid annotation key/));
    assert.throws(() => parseAnnotations(['a=1', 'a=2']), usage(/'a' is given twice/));
    assert.deepEqual(parseAnnotations(['-', 'a=1']), { clear: true, set: { a: '1' } });
    assert.equal(parseIngressTls('web-tls'), 'web-tls');
    assert.equal(parseIngressTls('-'), null);
    assert.throws(() => parseIngressTls('Bad_Name'), usage(/not a valid secret name/));
    assert.throws(() => parseIngressTls(''), usage(/needs the name of a secret/));
  });

  it('applies flags on create: no rule leaves host and path to follow the route', () => {
    const { spec, warnings } = applyIngressFlags(route(), { createingress: true });
    assert.equal(spec.createingress, true);
    assert.equal(spec.ingressconfig, undefined);
    assert.deepEqual(warnings, []);
    const full = applyIngressFlags(route(), { createingress: true, ingressrule: 'a.com=/p/*', ingressannotation: ['k=v'], ingresstls: 'tls' }).spec;
    assert.deepEqual(full.ingressconfig, { host: 'a.com', path: '/p/*', annotations: { k: 'v' }, tls: 'tls' });
  });

  it('applies flags on update: merge annotations, reset with -, disable with --createingress=false', () => {
    const stored = route({ createingress: true, ingressconfig: { host: 'a.com', path: '/p', annotations: { a: '1', b: '2' }, tls: 'tls' } });
    assert.deepEqual(applyIngressFlags(stored, { ingressannotation: ['b=3', 'c=4'] }).spec.ingressconfig?.annotations, { a: '1', b: '3', c: '4' });
    assert.deepEqual(applyIngressFlags(stored, { ingressannotation: ['-', 'c=4'] }).spec.ingressconfig?.annotations, { c: '4' });
    const reset = applyIngressFlags(stored, { ingressrule: '-', ingressannotation: ['-'], ingresstls: '-' }).spec;
    assert.equal(reset.ingressconfig, undefined);
    assert.equal(reset.createingress, true);
    assert.throws(() => applyIngressFlags(stored, { createingress: 'maybe' }), usage(/--createingress must be true or false, got 'maybe'/));
    const off = applyIngressFlags(stored, { createingress: 'false' }).spec;
    assert.equal(off.createingress, false);
    assert.deepEqual(off.ingressconfig, stored.ingressconfig, 'settings stay for when it is turned on again');
    assert.deepEqual(stored.ingressconfig?.annotations, { a: '1', b: '2' }, 'the input is not changed');
  });

  it('changes nothing when one flag is bad, and warns when settings have no effect', () => {
    const stored = route({ createingress: true, ingressconfig: { tls: 'x' } });
    assert.throws(() => applyIngressFlags(stored, { ingresstls: '-', ingressrule: 'nope' }), usage(/nope/));
    assert.deepEqual(stored.ingressconfig, { tls: 'x' });
    const { warnings } = applyIngressFlags(route(), { ingressrule: '*=/x' });
    assert.match(warnings[0], /take effect only with --createingress/);
  });

  it('shows the ingress host in route list', () => {
    assert.equal(routeListHost(route({ ingressconfig: { host: '*' } })), '*');
    assert.equal(routeListHost(route({ host: 'r.com' })), 'r.com');
    assert.equal(routeListHost(route()), '');
  });
});
