/**
 * Checks answers of the REST API against the OpenAPI document the front serves (`openapi.ts`): tests that drive
 * the API pass every answer through {@link checkAnswer}, so the document cannot drift from what is served.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { openApiDocument } from '../openapi.js';

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (ajv: Ajv2020) => void)(ajv);
ajv.addSchema({ $id: 'punk-api', components: openApiDocument.components });

type Operation = { responses: Record<string, { content?: Record<string, { schema: Record<string, unknown> }> }> };

/** The path template of `/api/v1/...` (`/mcp/servers/{id}`) that documents a concrete path (`/mcp/servers/echo`), if any. */
export function documentedPathOf(path: string): string | undefined {
  const concrete = path
    .replace(/^\/api\/v1/, '')
    .replace(/\?.*$/, '')
    .split('/');
  return Object.keys(openApiDocument.paths).find((template) => {
    const parts = template.split('/');
    return parts.length === concrete.length && parts.every((part, i) => part.startsWith('{') || part === concrete[i]);
  });
}

/**
 * Asserts that `body` with `status` is a documented answer of `method path` and matches its schema.
 * @throws Error naming the operation and the first mismatches.
 */
export function checkAnswer(method: string, path: string, status: number, body: unknown): void {
  const template = documentedPathOf(path);
  if (!template) throw new Error(`${method} ${path} is not in the OpenAPI document`);
  const operation = (openApiDocument.paths as Record<string, Record<string, unknown>>)[template]![method.toLowerCase()] as
    Operation | undefined;
  if (!operation) throw new Error(`${method} ${template} is not in the OpenAPI document`);
  const documented = operation.responses[String(status)];
  if (!documented)
    throw new Error(
      `${method} ${template} answered ${status}, which the OpenAPI document does not list (${Object.keys(operation.responses).join(', ')})`,
    );
  const schema = documented.content?.['application/json']?.schema;
  if (!schema) return;
  const rewritten = JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"punk-api#/components/')) as Record<string, unknown>;
  const validate = ajv.compile(rewritten);
  if (!validate(body))
    throw new Error(
      `${method} ${template} ${status}: the answer does not match the OpenAPI document: ${ajv.errorsText(validate.errors)}; answer ${JSON.stringify(body).slice(0, 500)}`,
    );
}
