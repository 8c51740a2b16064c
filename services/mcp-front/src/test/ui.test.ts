/**
 * The dashboard's files as mcp-front serves them (ui.ts), from a directory the test writes: an unbuilt dashboard
 * answers 503 saying how to build it; a built one answers its files with their caching headers, every other page
 * path with index.html, and refuses foreign origins and methods other than GET; `/ui/config.json` tells the sign-in,
 * and with the OAuth sign-in `connect-src` adds the issuer's origin, nothing else. (The real build, in a browser:
 * e2e/src/dashboard.)
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import express from 'express';
import { OriginPolicy } from '../cors.js';
import { dashboardConfigOf, uiContentSecurityPolicy, uiRouter, type DashboardConfig } from '../ui.js';

/** Serves `uiRouter` over `dir` on a free port; resolves with its base URL and a close function. */
async function serve(dir: string, config?: DashboardConfig): Promise<{ url: string; close: () => Promise<void> }> {
  const app = express();
  app.use(uiRouter({ origins: new OriginPolicy(['https://console.example.test'], 0), dir, ...(config && { config }) }));
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the dashboard files', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'punk-ui-test-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('answers 503 naming the build command while the dashboard is not built', async () => {
    const empty = join(dir, 'unbuilt');
    await mkdir(empty);
    const server = await serve(empty);
    try {
      const answer = await fetch(`${server.url}/ui/servers`);
      assert.equal(answer.status, 503);
      const { error } = (await answer.json()) as { error: { code: string; message: string } };
      assert.equal(error.code, 'DashboardNotBuilt');
      assert.match(error.message, /the dashboard is not built \(no .*index\.html\): run `npm run build` at the repository root/);
    } finally {
      await server.close();
    }
  });

  it('serves the files of a built dashboard with their caching headers and index.html for every page path', async () => {
    const built = join(dir, 'built');
    await mkdir(join(built, 'assets'), { recursive: true });
    await writeFile(join(built, 'index.html'), '<!doctype html><script type="module" src="/ui/assets/index-abc123.js"></script>');
    await writeFile(join(built, 'assets', 'index-abc123.js'), 'console.log(1);');
    await writeFile(join(built, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
    const server = await serve(built);
    try {
      const root = await fetch(`${server.url}/`, { redirect: 'manual' });
      assert.equal(root.status, 302);
      assert.equal(root.headers.get('location'), '/ui/');
      for (const path of ['/ui', '/ui/', '/ui/runs/42', '/ui/servers/time']) {
        const page = await fetch(`${server.url}${path}`);
        assert.equal(page.status, 200, path);
        assert.equal(page.headers.get('cache-control'), 'no-cache', path);
        assert.equal(page.headers.get('content-security-policy'), uiContentSecurityPolicy(), path);
        assert.match(await page.text(), /index-abc123\.js/, path);
      }
      const asset = await fetch(`${server.url}/ui/assets/index-abc123.js`);
      assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      const icon = await fetch(`${server.url}/ui/favicon.svg`);
      assert.equal(icon.status, 200);
      assert.equal(icon.headers.get('cache-control'), 'no-cache');
      assert.equal((await fetch(`${server.url}/ui/assets/gone-000.js`)).status, 404, 'a missing asset is no page');
      assert.equal(
        (await fetch(`${server.url}/ui/`, { headers: { origin: 'https://console.example.test' } })).status,
        200,
        'a configured origin',
      );
      const foreign = await fetch(`${server.url}/ui/`, { headers: { origin: 'https://evil.example' } });
      assert.equal(foreign.status, 403);
      const post = await fetch(`${server.url}/ui/servers`, { method: 'POST' });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get('allow'), 'GET, HEAD');
      assert.equal((await fetch(`${server.url}/`, { method: 'DELETE' })).status, 405);
    } finally {
      await server.close();
    }
  });

  it('tells the sign-in in /ui/config.json, and lets the page connect to the OAuth issuer only', async () => {
    const built = join(dir, 'built-oauth');
    await mkdir(built, { recursive: true });
    await writeFile(join(built, 'index.html'), '<!doctype html>');
    const config = dashboardConfigOf({
      publicUrl: 'https://punk.example.test/',
      issuer: 'https://id.example.test/realms/punk',
      jwksUrl: 'https://id.example.test/realms/punk/certs',
      requiredScopes: ['mcp'],
      dashboard: { clientId: 'punk-dashboard', scopes: [] },
    });
    assert.deepEqual(config, {
      authentication: true,
      oauth: {
        issuer: 'https://id.example.test/realms/punk',
        clientId: 'punk-dashboard',
        scopes: ['punk:admin', 'mcp'],
        resource: 'https://punk.example.test',
      },
    });
    assert.deepEqual(dashboardConfigOf({ publicUrl: 'https://punk.example.test' }), { authentication: true }, 'API keys only');
    assert.deepEqual(dashboardConfigOf(undefined), { authentication: false });
    const server = await serve(built, config);
    try {
      const answer = await fetch(`${server.url}/ui/config.json`);
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get('cache-control'), 'no-cache');
      assert.deepEqual(await answer.json(), config);
      const page = await fetch(`${server.url}/ui/`);
      const csp = page.headers.get('content-security-policy') ?? '';
      assert.match(csp, /(^|; )connect-src 'self' https:\/\/id\.example\.test(;|$)/);
      assert.match(csp, /(^|; )script-src 'self'(;|$)/);
    } finally {
      await server.close();
    }
  });
});
