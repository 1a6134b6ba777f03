import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorText } from './error-text.ts';

describe('errorText', () => {
  it('follows nested errors and causes, once each, up to a limit', () => {
    const refused = new Error('SASL authentication failed.');
    const conn = new Error('Connection to k:9092 failed.', { cause: refused });
    const all = Object.assign(new Error('createTopics failed 6 times.'), { errors: [conn, conn] });
    assert.equal(errorText(all), 'createTopics failed 6 times: Connection to k:9092 failed: SASL authentication failed');
    assert.equal(errorText(all, 2), 'createTopics failed 6 times: Connection to k:9092 failed');
    assert.equal(errorText('plain'), 'plain');
  });

  it('says what to change for a TLS failure', () => {
    const required = Object.assign(new Error('40CD:error:0A00045C:SSL routines:ssl3_read_bytes:tlsv13 alert certificate required\n'), {
      code: 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    });
    assert.match(errorText(required), /alert certificate required: the server wants a client certificate: put it in the trigger secret's cert and key$/);
    const untrusted = Object.assign(new Error('self-signed certificate in certificate chain'), { code: 'SELF_SIGNED_CERT_IN_CHAIN' });
    assert.equal(errorText(new Error('connect failed', { cause: untrusted })), "connect failed: self-signed certificate in certificate chain: the server's certificate is not from a CA the trigger trusts: put that CA in the trigger secret's ca");
  });
});
