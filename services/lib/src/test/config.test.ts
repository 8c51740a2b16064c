import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PunkError, loadConfig } from '../index.js';

test('defaults apply when nothing is set', () => {
  const config = loadConfig({});
  assert.equal(config.port, 4100);
  assert.equal(config.host, '127.0.0.1');
  assert.equal(config.manifests, 'examples');
  assert.equal(config.maxBodyBytes, 1024 * 1024);
  assert.equal(config.databaseUrl, undefined);
});

test('environment values are parsed, and overrides win', () => {
  const config = loadConfig({ PUNK_PORT: '5000', PUNK_LOG_LEVEL: 'debug', PUNK_DATABASE_URL: 'postgres://u@h:5432/d' }, { port: 0 });
  assert.equal(config.port, 0);
  assert.equal(config.logLevel, 'debug');
  assert.equal(config.databaseUrl, 'postgres://u@h:5432/d');
});

test('every bad value is named with its variable and value', () => {
  assert.throws(
    () => loadConfig({ PUNK_PORT: 'eighty', PUNK_LOG_LEVEL: 'loud', PUNK_TENANT: 'Bad_Tenant' }),
    (error: PunkError) => {
      assert.equal(error.code, 'InvalidConfig');
      assert.match(error.message, /PUNK_PORT="eighty"/);
      assert.match(error.message, /PUNK_LOG_LEVEL="loud"/);
      assert.match(error.message, /PUNK_TENANT="Bad_Tenant": must be a DNS label/);
      return true;
    },
  );
  assert.throws(() => loadConfig({ PUNK_PORT: '70000' }), /PUNK_PORT="70000"/);
  assert.throws(() => loadConfig({ PUNK_MAX_BODY_BYTES: '-1' }), /PUNK_MAX_BODY_BYTES/);
});

test('a bad flag is named as the flag, not as its environment variable', () => {
  assert.throws(() => loadConfig({}, { port: 'abc' }, { port: '--port' }), /--port="abc"/);
  assert.throws(() => loadConfig({ PUNK_PORT: 'abc' }, {}, { port: '--port' }), /PUNK_PORT="abc"/);
});
