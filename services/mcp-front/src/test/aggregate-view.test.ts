/** The view of an endpoint over the tenant's catalog (aggregate.ts): capabilities, ownership, routing. Pure functions. */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { serverCatalogSchema, type ServerCatalog } from '@punk/lib';
import { buildView, routeResource, routeTemplate } from '../aggregate.js';

function server(name: string, fields: Partial<ServerCatalog>): ServerCatalog {
  return serverCatalogSchema.parse({ name, namespace: 't', state: 'ready', ...fields });
}

const alpha = server('alpha', {
  capabilities: { tools: {}, resources: { subscribe: true }, completions: {} },
  tools: [{ name: 'b' }, { name: 'a' }],
  resources: [{ uri: 'x://shared', name: 'shared' }],
  resourceTemplates: [{ uriTemplate: 'x://items/{id}', name: 'items' }],
});
const beta = server('beta', {
  capabilities: { tools: {}, prompts: {} },
  tools: [{ name: 'a' }],
  prompts: [{ name: 'p' }],
  resources: [
    { uri: 'x://shared', name: 'shared too' },
    { uri: 'x://beta', name: 'beta' },
  ],
  resourceTemplates: [
    { uriTemplate: 'x://items/{id}', name: 'items too' },
    { uriTemplate: 'y://{path}', name: 'y' },
  ],
});

describe('the view of an endpoint', () => {
  it('advertises the union of the capabilities in scope', () => {
    assert.deepEqual(buildView([alpha, beta], { kind: 'aggregate' }).capabilities, {
      tools: { listChanged: true },
      resources: { listChanged: true },
      prompts: { listChanged: true },
      completions: {},
    });
    assert.deepEqual(buildView([alpha, beta], { kind: 'server', server: 'beta' }).capabilities, {
      tools: { listChanged: true },
      resources: { listChanged: true },
      prompts: { listChanged: true },
    });
  });

  it('is the same whatever order the catalog lists servers and items in', () => {
    const one = buildView([alpha, beta], { kind: 'aggregate' });
    const other = buildView([beta, alpha], { kind: 'aggregate' });
    assert.deepEqual(
      [...one.tools.entries()].map(([name]) => name),
      [...other.tools.entries()].map(([name]) => name),
    );
    assert.deepEqual([...one.resources.keys()], [...other.resources.keys()]);
    assert.deepEqual(
      one.templates.map((t) => [t.server, t.template.uriTemplate]),
      other.templates.map((t) => [t.server, t.template.uriTemplate]),
    );
  });

  it('gives each URI and URI template to the first server by name that lists it', () => {
    const view = buildView([beta, alpha], { kind: 'aggregate' });
    assert.equal(view.resources.get('x://shared')?.server, 'alpha');
    assert.deepEqual(
      view.templates.map((t) => [t.server, t.template.uriTemplate]),
      [
        ['alpha', 'x://items/{id}'],
        ['beta', 'y://{path}'],
      ],
    );
    assert.equal(routeResource(view, 'x://items/7'), 'alpha');
    assert.equal(routeResource(view, 'y://a'), 'beta');
    assert.equal(routeResource(view, 'x://beta'), 'beta');
    assert.equal(routeResource(view, 'z://none'), undefined);
    assert.equal(routeTemplate(view, 'x://items/{id}'), 'alpha');
    assert.equal(routeTemplate(view, 'y://{path}'), 'beta');
    assert.equal(routeTemplate(view, 'q://{nothing}'), undefined);
  });
});
