import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { z } from 'zod';
import { acceptToolBodySchema, apiKeyInputSchema, credentialInputSchema, registrationBodySchema } from '@punk/lib';
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

void test('the document refuses the bodies the API refuses and accepts the ones it accepts (schemas generated from validation)', () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (ajv: Ajv2020) => void)(ajv);
  ajv.addSchema({ $id: 'punk-api', components: openApiDocument.components } as Record<string, unknown>);
  const documented = (component: string, body: unknown) => ajv.validate(`punk-api#/components/schemas/${component}`, body);
  const cases: Array<[string, z.ZodType, unknown, boolean]> = [
    ['ApiKeyInput', apiKeyInputSchema, { name: 'ci', scopes: ['punk:admin'] }, true],
    ['ApiKeyInput', apiKeyInputSchema, { name: 'ci', scopes: ['two words'] }, false],
    ['ApiKeyInput', apiKeyInputSchema, { name: 'ci', groups: Array.from({ length: 101 }, (_, i) => `g${i}`) }, false],
    [
      'Registration',
      registrationBodySchema,
      { name: 'echo', type: 'http', url: 'https://mcp.example/mcp', headers: { 'X-Key': 'v' } },
      true,
    ],
    [
      'Registration',
      registrationBodySchema,
      { name: 'echo', type: 'http', url: 'https://mcp.example/mcp', headers: { 'bad header': 'v' } },
      false,
    ],
    ['Registration', registrationBodySchema, { name: 'echo', type: 'stdio', command: 'node', env: { '1BAD': 'v' } }, false],
    ['Registration', registrationBodySchema, { name: 'echo', type: 'http', url: 'https://mcp.example/mcp', timeout: '30 s' }, false],
    ['CredentialInput', credentialInputSchema, { id: 'gh', data: { value: 'x' } }, true],
    ['CredentialInput', credentialInputSchema, { id: 'gh', data: { 'bad key': 'x' } }, false],
    ['CredentialInput', credentialInputSchema, { id: 'gh', data: {} }, false],
    ['AcceptToolInput', acceptToolBodySchema, { fingerprint: 'f'.repeat(64) }, true],
    ['AcceptToolInput', acceptToolBodySchema, { fingerprint: 'F'.repeat(64) }, false],
  ];
  for (const [component, schema, body, valid] of cases) {
    assert.equal(schema.safeParse(body).success, valid, `validation of ${component} ${JSON.stringify(body)}`);
    assert.equal(
      documented(component, body),
      valid,
      `the document's ${component} on ${JSON.stringify(body)}: ${ajv.errorsText(ajv.errors)}`,
    );
  }
});
