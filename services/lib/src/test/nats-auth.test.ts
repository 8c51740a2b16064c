/**
 * NATS credentials in PUNK_NATS_URL: a real nats-server requiring a user and password (or a token) accepts the
 * credentials a URL's userinfo carries, refuses wrong ones with BusUnavailable, and no message shows them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLogger, NatsBus, parseNatsUrl, PunkError, redactNatsUrl } from '../index.js';
import { startPrivateNats, type PrivateNats } from './natstest.js';

const log = createLogger('nats-auth-test', 'silent');

/** `nats://<userinfo>@127.0.0.1:<port>` of a private server's URL. */
function withUserinfo(server: PrivateNats, userinfo: string): string {
  return server.url.replace('nats://', `nats://${userinfo}@`);
}

test('parseNatsUrl takes credentials out of the server list and redacts what it shows', () => {
  assert.deepEqual(parseNatsUrl('nats://punk:p%40ss@a:4222,nats://b:4222'), {
    servers: ['nats://a:4222', 'nats://b:4222'],
    credentials: { user: 'punk', pass: 'p@ss' },
    shown: 'nats://<redacted>@a:4222,nats://b:4222',
  });
  assert.deepEqual(parseNatsUrl('nats://s3cr3t-token@a:4222').credentials, { token: 's3cr3t-token' });
  assert.deepEqual(parseNatsUrl('nats://a:4222, 127.0.0.1:4223'), {
    servers: ['nats://a:4222', '127.0.0.1:4223'],
    credentials: {},
    shown: 'nats://a:4222, 127.0.0.1:4223',
  });
  assert.equal(redactNatsUrl('tls://u:p@a:4222,tls://t@b:4222'), 'tls://<redacted>@a:4222,tls://<redacted>@b:4222');
  // An unencoded @, / or # in a password: nothing of it is shown.
  assert.equal(redactNatsUrl('nats://punk:p@ss/w#rd@127.0.0.1:4222'), 'nats://<redacted>@127.0.0.1:4222');
  assert.throws(
    () => parseNatsUrl('nats://punk:S3cr3t%pw@a:4222'),
    (error: PunkError) =>
      error.code === 'InvalidConfig' && /PUNK_NATS_URL.*percent-encoding/.test(error.message) && !error.message.includes('S3cr3t'),
  );
});

describe('a nats-server that requires a user and password', () => {
  let server: PrivateNats;
  before(async () => {
    server = await startPrivateNats(['--user', 'punk', '--pass', 'Sup3r-secret']);
  });
  after(() => server.stop());

  test('accepts the credentials of the URL', async () => {
    const bus = await NatsBus.connect({ url: withUserinfo(server, 'punk:Sup3r-secret'), name: 'auth-test', log });
    try {
      const kv = await bus.keyValue({ name: 'auth_test', ttlMs: 0 });
      await kv.put('k', { ok: true });
      assert.deepEqual((await kv.get('k'))?.value, { ok: true });
    } finally {
      await bus.close();
    }
  });

  test('refuses a wrong password or none with BusUnavailable naming the server, never the password', async () => {
    for (const url of [withUserinfo(server, 'punk:wrong-Passw0rd'), server.url]) {
      await assert.rejects(NatsBus.connect({ url, name: 'auth-test', log }), (error: PunkError) => {
        assert.equal(error.code, 'BusUnavailable');
        assert.match(error.message, /cannot connect to NATS at nats:\/\/(<redacted>@)?127\.0\.0\.1:\d+/);
        assert.ok(!error.message.includes('wrong-Passw0rd'), error.message);
        return true;
      });
    }
  });
});

describe('a nats-server that requires a token', () => {
  let server: PrivateNats;
  before(async () => {
    server = await startPrivateNats(['--auth', 'T0ken-value']);
  });
  after(() => server.stop());

  test('accepts the token of the URL', async () => {
    const bus = await NatsBus.connect({ url: withUserinfo(server, 'T0ken-value'), name: 'auth-test', log });
    assert.equal(bus.isConnected(), true);
    await bus.close();
  });
});
