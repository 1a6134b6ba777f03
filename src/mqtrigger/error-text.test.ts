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
});
