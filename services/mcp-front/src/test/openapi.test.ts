import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { openApiDocument } from '../openapi.js';
import { checkAnswer, documentedPathOf } from './openapi-check.js';

test('the OpenAPI document is a valid OpenAPI 3.1 document', async () => {
  const validator = new Validator();
  const result = await validator.validate(JSON.parse(JSON.stringify(openApiDocument)) as Record<string, unknown>);
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2));
  assert.equal(validator.version, '3.1');
});

test('every operation has an operationId, a summary, and documents its error answers', () => {
  const ids = new Set<string>();
  for (const [path, item] of Object.entries(openApiDocument.paths)) {
    for (const [method, operation] of Object.entries(
      item as Record<string, { operationId?: string; summary?: string; responses?: Record<string, unknown> }>,
    )) {
      if (method === 'parameters') continue;
      assert.ok(operation.operationId, `${method} ${path} has no operationId`);
      assert.ok(!ids.has(operation.operationId), `operationId ${operation.operationId} is used twice`);
      ids.add(operation.operationId);
      assert.ok(operation.summary, `${method} ${path} has no summary`);
      if (path !== '/openapi.json') assert.ok(operation.responses?.['403'], `${method} ${path} does not document the admin refusal`);
    }
  }
});

test('checkAnswer accepts a documented answer and names what is wrong in an undocumented one', () => {
  assert.equal(documentedPathOf('/api/v1/mcp/servers/echo/tools'), '/mcp/servers/{id}/tools');
  checkAnswer('GET', '/api/v1/mcp/servers', 200, {
    servers: [{ name: 'a', namespace: 'default', managed: true, state: 'ready', toolCount: 2 }],
  });
  checkAnswer('GET', '/api/v1/mcp/servers/x', 404, { error: { code: 'ServerNotFound', message: 'no server x' } });
  assert.throws(
    () => checkAnswer('GET', '/api/v1/mcp/servers', 200, { servers: [{ name: 'a' }] }),
    /must have required property 'namespace'/,
  );
  assert.throws(() => checkAnswer('GET', '/api/v1/mcp/servers', 418, {}), /does not list/);
  assert.throws(() => checkAnswer('GET', '/api/v1/nothing', 200, {}), /not in the OpenAPI document/);
});
