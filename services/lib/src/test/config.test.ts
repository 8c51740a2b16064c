import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PunkError, loadConfig, unauthenticatedExposureWarning } from '../index.js';

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
  assert.throws(() => loadConfig({ PUNK_WORKFLOW_MAX_NODES: '0' }), /PUNK_WORKFLOW_MAX_NODES="0"/);
});

test('the workflow limits default to 200 nodes, 5 minutes and 1 MiB, and are read from their variables', () => {
  const defaults = loadConfig({});
  assert.deepEqual([defaults.workflowMaxNodes, defaults.workflowMaxRunMs, defaults.workflowMaxResultBytes], [200, 300_000, 1_048_576]);
  const set = loadConfig({ PUNK_WORKFLOW_MAX_NODES: '5', PUNK_WORKFLOW_MAX_RUN_MS: '1000', PUNK_WORKFLOW_MAX_RESULT_BYTES: '64' });
  assert.deepEqual([set.workflowMaxNodes, set.workflowMaxRunMs, set.workflowMaxResultBytes], [5, 1000, 64]);
});

test('a bad flag is named as the flag, not as its environment variable', () => {
  assert.throws(() => loadConfig({}, { port: 'abc' }, { port: '--port' }), /--port="abc"/);
  assert.throws(() => loadConfig({ PUNK_PORT: 'abc' }, {}, { port: '--port' }), /PUNK_PORT="abc"/);
});

test('a bad secret is named with its length, never its value', () => {
  const secrets = {
    PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: 'short-admin',
    PUNK_SESSION_SIGNING_KEY: 'short-signing',
    PUNK_DATABASE_URL: 'pw hunter2',
    PUNK_AUTH_INTROSPECTION_CLIENT_SECRET: ' ',
  };
  assert.throws(
    () => loadConfig({ ...secrets, PUNK_PORT: 'eighty' }),
    (error: PunkError) => {
      assert.match(error.message, /PUNK_AUTH_BOOTSTRAP_ADMIN_KEY=<redacted, 11 characters>: must be at least 32 characters/);
      assert.match(error.message, /PUNK_SESSION_SIGNING_KEY=<redacted, 13 characters>: must be at least 32 characters/);
      assert.match(error.message, /PUNK_DATABASE_URL=<redacted, 10 characters>: must be a URL/);
      assert.match(error.message, /PUNK_PORT="eighty"/);
      for (const value of ['short-admin', 'short-signing', 'hunter2'])
        assert.ok(!error.message.includes(value), `the message shows ${value}: ${error.message}`);
      return true;
    },
  );
});

test('numbers and booleans are refused with a sentence', () => {
  assert.throws(() => loadConfig({ PUNK_PAGE_SIZE: '1.5' }), /PUNK_PAGE_SIZE="1.5": must be an integer from 1 to 1000$/);
  assert.throws(() => loadConfig({ PUNK_PAGE_SIZE: '5000' }), /PUNK_PAGE_SIZE="5000": must be an integer from 1 to 1000$/);
  assert.throws(() => loadConfig({ PUNK_PORT: 'eighty' }), /PUNK_PORT="eighty": must be an integer from 0 to 65535$/);
  assert.throws(() => loadConfig({ PUNK_SESSION_TTL_MS: ' ' }), /PUNK_SESSION_TTL_MS=" ": must be a positive integer$/);
  assert.throws(() => loadConfig({ PUNK_AUTH_CLOCK_TOLERANCE_MS: '-1' }), /must be an integer of 0 or more$/);
  assert.throws(() => loadConfig({ PUNK_LOGGING_CAPABILITY: 'maybe' }), /PUNK_LOGGING_CAPABILITY="maybe": must be true or false$/);
});

test('PUNK_MCP_PATH may not take a path Punk serves itself', () => {
  for (const path of [
    '/healthz',
    '/readyz',
    '/metrics',
    '/api/v1/runs',
    '/API',
    '/servers/memory/mcp',
    '/sse',
    '/.well-known/oauth-protected-resource',
  ]) {
    assert.throws(
      () => loadConfig({ PUNK_MCP_PATH: path }),
      /PUNK_MCP_PATH=.*must not be or lie under a path Punk serves itself: \/healthz, \/readyz, \/metrics, \/api, \/servers, \/sse, \/.well-known/,
      path,
    );
  }
  for (const path of ['/mcp', '/v1/mcp', '/apis', '/serversx']) assert.equal(loadConfig({ PUNK_MCP_PATH: path }).mcpPath, path);
});

test('a non-loopback listener without authentication gets a warning', () => {
  assert.equal(unauthenticatedExposureWarning(loadConfig({}), 'the MCP endpoint'), undefined);
  assert.equal(unauthenticatedExposureWarning(loadConfig({ PUNK_HOST: '::1' }), 'the MCP endpoint'), undefined);
  assert.equal(unauthenticatedExposureWarning(loadConfig({ PUNK_HOST: '0.0.0.0', PUNK_AUTH_MODE: 'on' }), 'the MCP endpoint'), undefined);
  assert.match(
    unauthenticatedExposureWarning(loadConfig({ PUNK_HOST: '0.0.0.0' }), 'the MCP endpoint') ?? '',
    /^listening on 0\.0\.0\.0, which is not a loopback address, with PUNK_AUTH_MODE=off: anyone on the network can use the MCP endpoint without authentication/,
  );
});

test('gateway settings: networks must be CIDRs, keys 32 bytes, and a key is never shown', () => {
  assert.deepEqual(loadConfig({ PUNK_UPSTREAM_ALLOWED_NETWORKS: '10.96.0.0/12, fd00::/8' }).upstreamAllowedNetworks, [
    '10.96.0.0/12',
    'fd00::/8',
  ]);
  for (const bad of ['10.0.0.0/33', 'fd00::/129', '10.0.0/8', 'example.com/8', '10.0.0.1']) {
    assert.throws(
      () => loadConfig({ PUNK_UPSTREAM_ALLOWED_NETWORKS: bad }),
      /PUNK_UPSTREAM_ALLOWED_NETWORKS entry 1=.*each entry must be a CIDR/,
      bad,
    );
  }
  const key = Buffer.alloc(32, 1).toString('base64');
  assert.equal(loadConfig({ PUNK_ENCRYPTION_KEY: `k1:${key}` }).encryptionKey, `k1:${key}`);
  const short = Buffer.alloc(16, 1).toString('base64');
  assert.throws(
    () => loadConfig({ PUNK_ENCRYPTION_KEY: short }),
    (error: Error) => {
      assert.match(error.message, /PUNK_ENCRYPTION_KEY=<redacted, 24 characters>: must decode to exactly 32 bytes/);
      assert.ok(!error.message.includes(short));
      return true;
    },
  );
  assert.throws(() => loadConfig({ PUNK_TOOL_PINNING: 'ignore' }), /PUNK_TOOL_PINNING="ignore"/);
});

test('a bad entry of a list setting is named by its position and length, each problem once', () => {
  const good = Buffer.alloc(32, 2).toString('base64');
  assert.throws(
    () => loadConfig({ PUNK_ENCRYPTION_PREVIOUS_KEYS: `${good}, ab,c` }),
    (error: Error & { details?: { problems?: string[] } }) => {
      assert.deepEqual(error.details?.problems, [
        'PUNK_ENCRYPTION_PREVIOUS_KEYS entry 2=<redacted, 2 characters>: must decode to exactly 32 bytes (AES-256)',
        'PUNK_ENCRYPTION_PREVIOUS_KEYS entry 3=<redacted, 1 characters>: must decode to exactly 32 bytes (AES-256)',
      ]);
      assert.ok(!error.message.includes(good));
      return true;
    },
  );
  // Two entries breaking the same rule in the same way are still two problems: each names its entry.
  assert.throws(
    () => loadConfig({ PUNK_ENCRYPTION_PREVIOUS_KEYS: 'a,b' }),
    (error: Error & { details?: { problems?: string[] } }) => {
      assert.deepEqual(error.details?.problems, [
        'PUNK_ENCRYPTION_PREVIOUS_KEYS entry 1=<redacted, 1 characters>: must decode to exactly 32 bytes (AES-256)',
        'PUNK_ENCRYPTION_PREVIOUS_KEYS entry 2=<redacted, 1 characters>: must decode to exactly 32 bytes (AES-256)',
      ]);
      return true;
    },
  );
  assert.throws(
    () => loadConfig({ PUNK_UPSTREAM_ALLOWED_NETWORKS: '10.0.0.0/8,10.0.0.1' }),
    /^.*PUNK_UPSTREAM_ALLOWED_NETWORKS entry 2="10\.0\.0\.1": each entry must be a CIDR/,
  );
});
