/**
 * DNS-rebinding protection of every Punk listener (service/hosts.ts, listenHealth): which names a
 * configuration answers to, and a real listener refusing a rebound `Host` on every path but the probes.
 */
import { strict as assert } from 'node:assert';
import { request } from 'node:http';
import { describe, it } from 'node:test';
import { allowedHostsOf, isAllowedHost, listenHealth, LOOPBACK_HOST_NAMES } from '../index.js';

function get(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    request(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on('error', reject)
      .end();
  });
}

describe('allowed hosts', () => {
  it('loopback listeners answer loopback names and the public URL host; others any host unless PUNK_ALLOWED_HOSTS says', () => {
    assert.deepEqual(allowedHostsOf({ host: '127.0.0.1', allowedHosts: undefined, publicUrl: undefined }), [...LOOPBACK_HOST_NAMES]);
    assert.deepEqual(allowedHostsOf({ host: '::1', allowedHosts: undefined, publicUrl: 'https://punk.example.com' }), [
      ...LOOPBACK_HOST_NAMES,
      'punk.example.com',
    ]);
    assert.equal(allowedHostsOf({ host: '0.0.0.0', allowedHosts: undefined, publicUrl: undefined }), undefined);
    assert.deepEqual(allowedHostsOf({ host: '0.0.0.0', allowedHosts: ['punk.internal'], publicUrl: undefined }), ['punk.internal']);
  });

  it('matches names on any port, case-insensitively, IPv6 in brackets; never a missing or malformed header', () => {
    const hosts = [...LOOPBACK_HOST_NAMES];
    for (const ok of ['localhost', 'LOCALHOST:4100', '127.0.0.1:80', '[::1]:4100', '[::1]']) assert.ok(isAllowedHost(ok, hosts), ok);
    for (const bad of [
      undefined,
      '',
      'evil.example',
      'evil.example:4100',
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      'localhost:4100:1',
      '[::2]',
    ]) {
      assert.ok(!isAllowedHost(bad, hosts), String(bad));
    }
  });

  it('a listener with an allow-list refuses a rebound Host with 403 on every path but /healthz and /readyz', async () => {
    const http = await listenHealth('127.0.0.1', 0, async () => undefined, 'test', { allowedHosts: LOOPBACK_HOST_NAMES });
    http.setHandler((_req, res) => res.writeHead(200).end('served'));
    try {
      assert.equal(await get(`${http.url}/api/v1/runs`, 'evil.example'), 403);
      assert.equal(await get(`${http.url}/mcp`, 'evil.example:4100'), 403);
      assert.equal(await get(`${http.url}/api/v1/runs`, new URL(http.url).host), 200);
      assert.equal(await get(`${http.url}/healthz`, 'evil.example'), 200);
      assert.equal(await get(`${http.url}/readyz`, 'evil.example'), 200);
    } finally {
      await http.close();
    }
  });
});
