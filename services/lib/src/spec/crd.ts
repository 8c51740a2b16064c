/**
 * The CustomResourceDefinitions of Punk (apiextensions.k8s.io/v1), generated from the zod schemas of
 * `mcpserver.ts`, `mcpcredential.ts`, `mcppolicy.ts` and `mcpworkflow.ts` so the cluster validates exactly what Punk validates. `npm run crds` writes them
 * into `crds/`; a test fails when the committed files and this module disagree.
 *
 * A CRD's schema must be structural (Kubernetes docs, "Specifying a structural schema"): every node
 * has a `type` (or `x-kubernetes-preserve-unknown-fields`), and there is no `$ref`, no
 * `additionalProperties: false` (the API server prunes unknown fields instead). The zod
 * `superRefine` and `refine` checks have no JSON Schema form, so they are restated here as CEL
 * rules (`x-kubernetes-validations`, Kubernetes docs "Validation rules").
 */
import { z } from 'zod';
import { stringify } from 'yaml';
import { PunkError } from '../errors.js';
import {
  API_GROUP,
  commandSchema,
  IDLE_MINIMUM_MESSAGE,
  mcpServerSpecSchema,
  mcpServerStatusSchema,
  OPENAPI_REFRESH_INTERVAL,
} from './mcpserver.js';
import { mcpCredentialSpecSchema, mcpCredentialStatusSchema } from './mcpcredential.js';
import { mcpPolicySpecSchema, mcpPolicyStatusSchema } from './mcppolicy.js';
import { mcpWorkflowSpecSchema, mcpWorkflowStatusSchema } from './mcpworkflow.js';

/** A node of an OpenAPI v3 schema as a CRD holds it (apiextensions.k8s.io/v1 `JSONSchemaProps`). */
export type JsonSchemaProps = { [keyword: string]: unknown };

/** One CEL validation rule (apiextensions.k8s.io/v1 `ValidationRule`); `self` is the node it sits on. */
export interface ValidationRule {
  /** CEL expression that is true for a valid value. */
  rule: string;
  /** Message shown when the rule is false; names the field. */
  message: string;
  /** Path of the field the error is reported at, relative to the node (`.port`); the node itself when absent. */
  fieldPath?: string;
  /** Kind of error: FieldValueInvalid (default), FieldValueForbidden, FieldValueRequired or FieldValueDuplicate. */
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
}

/** Where a rule goes: property names from the schema's root, `[]` for the items of an array. */
interface PlacedRule {
  at: readonly string[];
  rules: readonly ValidationRule[];
}

/** The file `npm run crds` writes the McpServer CRD to, inside `crds/` (`<group>_<plural>.yaml`, as kubebuilder names them). */
export const MCPSERVER_CRD_FILE = `${API_GROUP}_mcpservers.yaml`;
/** The file `npm run crds` writes the McpCredential CRD to, inside `crds/`. */
export const MCPCREDENTIAL_CRD_FILE = `${API_GROUP}_mcpcredentials.yaml`;
/** The file `npm run crds` writes the McpPolicy CRD to, inside `crds/`. */
export const MCPPOLICY_CRD_FILE = `${API_GROUP}_mcppolicies.yaml`;
/** The file `npm run crds` writes the McpWorkflow CRD to, inside `crds/`. */
export const MCPWORKFLOW_CRD_FILE = `${API_GROUP}_mcpworkflows.yaml`;

// Formats kube-apiserver knows (apiextensions-apiserver validation/formats.go). With one of these,
// zod's `pattern` for the same format (date-time, email, …) is dropped: the API server would report
// every bad value twice. zod's other formats (such as `starts_with`) always come with a `pattern` that
// carries the rule, and are dropped instead.
const KUBERNETES_FORMATS = new Set([
  'bsonobjectid',
  'uri',
  'email',
  'hostname',
  'ipv4',
  'ipv6',
  'cidr',
  'mac',
  'uuid',
  'uuid3',
  'uuid4',
  'uuid5',
  'isbn',
  'isbn10',
  'isbn13',
  'creditcard',
  'ssn',
  'hexcolor',
  'rgbcolor',
  'byte',
  'password',
  'date',
  'duration',
  'datetime',
  'date-time',
  'int32',
  'int64',
  'float',
  'double',
]);

// Keywords copied as they are; anything else zod emits is either rewritten below or refused.
const COPIED_KEYWORDS = new Set([
  'description',
  'type',
  'default',
  'enum',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'pattern',
  'minItems',
  'maxItems',
  'required',
]);

/**
 * Converts a zod schema to a Kubernetes structural schema: `z.toJSONSchema` with `io: 'input'` (so
 * defaults appear), then `$schema` and `additionalProperties: false` dropped, free-form records
 * (`z.record(z.string(), z.unknown())`) marked `x-kubernetes-preserve-unknown-fields: true`, formats
 * Kubernetes does not know dropped (and zod's pattern for one it knows), descriptions and defaults kept (they feed `kubectl explain` and
 * API-server defaulting). Keys come out in a fixed order (description, type, then zod's order). A `command`
 * (`commandSchema`: a string or a list) takes its list form, the one type a structural schema allows.
 * @throws PunkError `UnsupportedSchema` naming the path of a node with no structural form
 *   (a union or nullable, a `$ref`, a node without a type).
 */
export function structuralSchema(schema: z.ZodType): JsonSchemaProps {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    io: 'input',
    override: (ctx) => {
      if (ctx.zodSchema !== commandSchema) return;
      delete ctx.jsonSchema.anyOf; // the string form: a structural schema has one type per node
      Object.assign(ctx.jsonSchema, { type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } });
    },
  }) as JsonSchemaProps;
  return structural(json, '');
}

function structural(node: JsonSchemaProps, path: string): JsonSchemaProps {
  if (Array.isArray(node.type)) {
    throw new PunkError(
      'UnsupportedSchema',
      `${path || '<root>'}: a Kubernetes structural schema has one type per node, not ${node.type.join(' or ')}`,
      { path },
    );
  }
  const out: JsonSchemaProps = {};
  if (node.description !== undefined) out.description = node.description;
  if (node.type !== undefined) out.type = node.type;
  let preserveUnknownFields = false;
  const knownFormat = KUBERNETES_FORMATS.has(node.format as string);
  for (const [keyword, value] of Object.entries(node)) {
    if (keyword === 'description' || keyword === 'type' || (keyword === 'pattern' && knownFormat)) continue;
    if (COPIED_KEYWORDS.has(keyword)) out[keyword] = value;
    else if (keyword === 'format') {
      if (knownFormat) out.format = value;
    } else if (keyword === 'properties') {
      out.properties = Object.fromEntries(
        Object.entries(value as Record<string, JsonSchemaProps>).map(([name, child]) => [name, structural(child, `${path}.${name}`)]),
      );
    } else if (keyword === 'items') out.items = structural(value as JsonSchemaProps, `${path}[]`);
    else if (keyword === 'additionalProperties') {
      if (value === false) continue; // unknown fields are pruned by the API server
      if (typeof value === 'object' && value !== null && Object.keys(value).length === 0) preserveUnknownFields = true;
      else out.additionalProperties = structural(value as JsonSchemaProps, `${path}.*`);
    } else if (keyword === 'propertyNames' && JSON.stringify(value) === '{"type":"string"}') {
      continue; // map keys are always strings in Kubernetes
    } else {
      throw new PunkError(
        'UnsupportedSchema',
        `${path || '<root>'}: JSON Schema keyword "${keyword}" has no form in a Kubernetes structural schema`,
        { path, keyword },
      );
    }
  }
  if (preserveUnknownFields) out['x-kubernetes-preserve-unknown-fields'] = true;
  if (out.type === undefined && !preserveUnknownFields) {
    throw new PunkError('UnsupportedSchema', `${path || '<root>'}: a Kubernetes structural schema needs a type on every node`, { path });
  }
  return out;
}

/** Adds rules at their places in a structural schema (in place). @throws PunkError `UnsupportedSchema` when a place does not exist. */
function placeRules(schema: JsonSchemaProps, placed: readonly PlacedRule[]): void {
  for (const { at, rules } of placed) {
    const node = nodeAt(schema, at);
    node['x-kubernetes-validations'] = [...((node['x-kubernetes-validations'] as ValidationRule[] | undefined) ?? []), ...rules];
  }
}

const valueXorValueFrom: ValidationRule = {
  rule: 'has(self.value) != has(self.valueFrom)',
  message: 'set exactly one of value and valueFrom',
};

/**
 * The checks of `mcpServerSpecSchema` that zod makes in code (its `superRefine` and `refine`), as CEL
 * rules on the spec; each message names the field, and `fieldPath` points at it. Three per-value checks
 * stay out: no NUL in an env value, no reserved header name, header value characters. A string rule
 * on every item of an unbounded list of unbounded strings exceeds the API server's CEL cost budget
 * ("estimated rule cost exceeds budget by factor of more than 100x"); the operator parses each spec
 * with `mcpServerSpecSchema` and reports such a value as a Degraded condition naming the field.
 */
const MCPSERVER_SPEC_RULES: readonly PlacedRule[] = [
  {
    at: [],
    rules: [
      {
        rule: '(has(self.image) ? 1 : 0) + (has(self.package) ? 1 : 0) + (has(self.url) ? 1 : 0) + (has(self.openapi) ? 1 : 0) == 1',
        message:
          'set exactly one of image, package, url and openapi: in the cluster a server runs from an image or a package (command alone runs a local process under punk up only)',
      },
      {
        rule: '!has(self.url) || !has(self.command)',
        message: 'command applies only to image and package servers, not to url',
        fieldPath: '.command',
        reason: 'FieldValueForbidden',
      },
      {
        rule: '!has(self.url) || !has(self.args)',
        message: 'args apply only to image and package servers, not to url',
        fieldPath: '.args',
        reason: 'FieldValueForbidden',
      },
      {
        rule: "!has(self.url) || !has(self.transport) || self.transport != 'stdio'",
        message: 'a url server speaks streamable-http or sse, not stdio',
        fieldPath: '.transport',
      },
      {
        rule: 'has(self.url) || has(self.openapi) || !has(self.headers)',
        message: 'headers apply only to url and openapi servers',
        fieldPath: '.headers',
        reason: 'FieldValueForbidden',
      },
      ...(['command', 'args', 'transport', 'port', 'protocolEra'] as const).map((field) => ({
        rule: `!has(self.openapi) || !has(self.${field})`,
        message: `${field} does not apply to an openapi server (Punk serves its tools itself)`,
        fieldPath: `.${field}`,
        reason: 'FieldValueForbidden' as const,
      })),
    ],
  },
  { at: ['url'], rules: [{ rule: "isURL(self) && url(self).getScheme() in ['http', 'https']", message: 'must be an http or https URL' }] },
  {
    at: ['openapi'],
    rules: [
      {
        rule: '(has(self.url) ? 1 : 0) + (has(self.file) ? 1 : 0) + (has(self.content) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) == 1',
        message: 'set exactly one of url, file, content and configMapKeyRef',
      },
      {
        rule: '!has(self.refreshInterval) || has(self.url)',
        message: OPENAPI_REFRESH_INTERVAL.urlOnly,
        fieldPath: '.refreshInterval',
        reason: 'FieldValueForbidden',
      },
    ],
  },
  {
    at: ['openapi', 'refreshInterval'],
    rules: [{ rule: `duration(self) >= duration('${OPENAPI_REFRESH_INTERVAL.minimum}')`, message: OPENAPI_REFRESH_INTERVAL.tooShort }],
  },
  ...(['scaleToZeroAfter', 'wakeTimeout'] as const).map((field) => ({
    at: ['idle', field],
    rules: [{ rule: "duration(self) >= duration('1s')", message: IDLE_MINIMUM_MESSAGE }],
  })),
  {
    at: ['openapi', 'url'],
    rules: [{ rule: "isURL(self) && url(self).getScheme() in ['http', 'https']", message: 'must be an http or https URL' }],
  },
  {
    at: ['openapi', 'baseUrl'],
    rules: [{ rule: "isURL(self) && url(self).getScheme() in ['http', 'https']", message: 'must be an http or https URL' }],
  },
  {
    at: ['auth'],
    rules: [
      {
        rule: '!(has(self.tokenExchange) && has(self.perUser))',
        message: 'auth.tokenExchange and auth.perUser exclude each other: declare one',
      },
    ],
  },
  ...(['authorizationUrl', 'tokenUrl'] as const).map((field) => ({
    at: ['auth', 'perUser', field],
    rules: [{ rule: "isURL(self) && url(self).getScheme() in ['http', 'https']", message: 'must be an http or https URL' }],
  })),
  { at: ['env', '[]'], rules: [valueXorValueFrom] },
  { at: ['headers', '[]'], rules: [valueXorValueFrom] },
  { at: ['sandbox', 'egress', '[]'], rules: [{ rule: 'has(self.host) != has(self.cidr)', message: 'set exactly one of host and cidr' }] },
];

/**
 * The checks of `mcpCredentialSpecSchema` that zod makes in code, as CEL rules: exactly one of secretRef and values
 * (and of env and file in each value), oauth2 settings only with type
 * oauth2, and the token URL's scheme (the `uri` format does not restrict it).
 */
const MCPCREDENTIAL_SPEC_RULES: readonly PlacedRule[] = [
  {
    at: [],
    rules: [
      {
        rule: "!has(self.oauth2) || (has(self.type) && self.type == 'oauth2')",
        message: 'oauth2 settings apply only to type oauth2',
        fieldPath: '.oauth2',
        reason: 'FieldValueForbidden',
      },
      {
        rule: 'has(self.secretRef) != has(self.values)',
        message: 'set exactly one of secretRef (a Secret, in a cluster) and values (environment variables or files, under punk up)',
        fieldPath: '.secretRef',
      },
    ],
  },
  { at: ['values', '[]', 'valueFrom'], rules: [{ rule: 'has(self.env) != has(self.file)', message: 'set exactly one of env and file' }] },
  {
    at: ['oauth2', 'tokenUrl'],
    rules: [{ rule: "isURL(self) && url(self).getScheme() in ['http', 'https']", message: 'must be an http or https URL' }],
  },
];

/**
 * The checks of `mcpPolicySpecSchema` that zod makes in code, as CEL rules: a rule's level range. Unique rule and
 * limit names are not CEL: the lists are `x-kubernetes-list-type: map` keyed by `name`, which the API server
 * enforces at no CEL cost (a pairwise comparison over an unbounded list exceeds the cost budget).
 */
const MCPPOLICY_SPEC_RULES: readonly PlacedRule[] = [
  {
    at: ['rules', '[]', 'sideEffectLevels'],
    rules: [{ rule: '!has(self.min) || !has(self.max) || self.min <= self.max', message: 'min must not be greater than max' }],
  },
];

/**
 * The checks of an McpWorkflow that CEL can make at apply: `spec.start` names a node, an output node has no `next`.
 * Node ids are unique through the list-map keyed by `id`. Unknown targets, cycles and unreachable nodes are
 * `validateWorkflowGraph`'s (a graph walk is not CEL).
 */
const MCPWORKFLOW_SPEC_RULES: readonly PlacedRule[] = [
  {
    at: [],
    rules: [{ rule: 'self.nodes.exists(n, n.id == self.start)', message: 'start must be the id of a node', fieldPath: '.start' }],
  },
  {
    at: ['nodes', '[]'],
    rules: [{ rule: "self.kind != 'output' || !has(self.next)", message: 'an output node ends the run: remove next', fieldPath: '.next' }],
  },
];

/**
 * Every object schema's own rules: names Kubernetes accepts that Punk does not. Each is reported at
 * `metadata.name` (without a fieldPath, a rule at the root is reported at `<nil>`).
 */
const OBJECT_RULES: readonly ValidationRule[] = [
  {
    rule: "self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
    message: 'metadata.name must be a DNS-1035 label: at most 63 lower-case letters, digits and -, starting with a letter',
    fieldPath: '.metadata.name',
  },
];

/**
 * The McpServer's own object rules, the names of `mcpServerSchema`: no name ending in `-egress` (the suffix of
 * a server's egress proxy children, so they never share a name with another server's), and a name of at most
 * 56 characters when the server needs an egress proxy (a package server, or a `host` in `sandbox.egress`), so
 * `<name>-egress` is a DNS-1035 label too.
 */
const MCPSERVER_OBJECT_RULES: readonly ValidationRule[] = [
  {
    rule: "!self.metadata.name.endsWith('-egress')",
    message: 'metadata.name must not end in -egress: Punk names the egress proxy of McpServer <name> <name>-egress',
    fieldPath: '.metadata.name',
  },
  {
    rule: 'self.metadata.name.size() <= 56 || (!has(self.spec.package) && !(has(self.spec.sandbox) && has(self.spec.sandbox.egress) && self.spec.sandbox.egress.exists(e, has(e.host))))',
    message:
      'metadata.name must have at most 56 characters when the server needs an egress proxy (a package, or a host in spec.sandbox.egress): its children are named <name>-egress, at most 63 characters',
    fieldPath: '.metadata.name',
  },
];

/** One printer column of `kubectl get` (apiextensions.k8s.io/v1 `CustomResourceColumnDefinition`). */
interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'date';
  jsonPath: string;
  description?: string;
}

/** What differs between Punk's kinds; everything else of a CRD is the same for all of them. */
interface KindDefinition {
  kind: string;
  plural: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  specRules: readonly PlacedRule[];
  /** Rules on the whole object beside {@link OBJECT_RULES} (`self` is the object). */
  objectRules?: readonly ValidationRule[];
  status: z.ZodType;
  /** Lists of the spec keyed by `name` (`x-kubernetes-list-type: map`): names unique, order kept. */
  namedLists?: readonly (readonly string[])[];
  /** Lists of the spec keyed by `id`, the same way. */
  idLists?: readonly (readonly string[])[];
  columns: PrinterColumn[];
  /** The scale subresource (`kubectl scale`, a HorizontalPodAutoscaler), when the kind has one. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath: string };
}

const ready: PrinterColumn = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' };
const age: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/** Node at `at` (property names, `[]` for items) of a structural schema. */
function nodeAt(schema: JsonSchemaProps, at: readonly string[]): JsonSchemaProps {
  let node = schema;
  for (const step of at) {
    const next = step === '[]' ? node.items : (node.properties as Record<string, JsonSchemaProps> | undefined)?.[step];
    if (next === undefined) throw new PunkError('UnsupportedSchema', `no schema node at ${at.join('.')}`, { at });
    node = next as JsonSchemaProps;
  }
  return node;
}

/** Marks a list as a map keyed by `key` (Kubernetes "list-type map"): the API server refuses a repeated key. */
function keyBy(list: JsonSchemaProps, key: string): void {
  list['x-kubernetes-list-type'] = 'map';
  list['x-kubernetes-list-map-keys'] = [key];
}

/**
 * One CRD of group `mcp.punk.dev`, version `v1alpha1` (served, storage), namespaced, with the `status`
 * subresource (and `scale` when the kind has one) and the kind's schemas, rules and printer columns.
 * @throws PunkError `UnsupportedSchema` when a schema has no structural form.
 */
function crdOf(definition: KindDefinition): JsonSchemaProps {
  const spec = structuralSchema(definition.spec);
  placeRules(spec, definition.specRules);
  for (const at of definition.namedLists ?? []) keyBy(nodeAt(spec, at), 'name');
  for (const at of definition.idLists ?? []) keyBy(nodeAt(spec, at), 'id');
  const status = structuralSchema(definition.status);
  const conditions = (status.properties as Record<string, JsonSchemaProps>).conditions!;
  conditions['x-kubernetes-list-type'] = 'map';
  conditions['x-kubernetes-list-map-keys'] = ['type'];
  const { kind, plural } = definition;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase(), shortNames: definition.shortNames },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              description: definition.description,
              type: 'object',
              properties: {
                apiVersion: { description: 'Versioned schema of this object: mcp.punk.dev/v1alpha1.', type: 'string' },
                kind: { description: `Kind of this object: ${kind}.`, type: 'string' },
                // name declared so the rules below can report at metadata.name (a fieldPath must exist in the schema).
                metadata: { type: 'object', properties: { name: { type: 'string' } } },
                spec,
                status,
              },
              required: ['spec'],
              'x-kubernetes-validations': [...OBJECT_RULES, ...(definition.objectRules ?? [])],
            },
          },
          subresources: { status: {}, ...(definition.scale && { scale: definition.scale }) },
          additionalPrinterColumns: definition.columns,
        },
      ],
    },
  };
}

/**
 * The McpServer CRD as an object: short name `mcps`, printer columns READY, TRANSPORT, TOOLS, ENDPOINT and AGE,
 * the spec and status schemas of `mcpserver.ts`, and the scale subresource over `spec.replicas`, `status.replicas`
 * and `status.selector`.
 * @throws PunkError `UnsupportedSchema` when a schema has no structural form.
 */
export function mcpServerCrd(): JsonSchemaProps {
  return crdOf({
    kind: 'McpServer',
    plural: 'mcpservers',
    shortNames: ['mcps'],
    description:
      'An MCP server that Punk runs in a sandboxed pod (image or package) or reaches at a url, and serves through its gateway. The namespace is the tenant.',
    spec: mcpServerSpecSchema.describe(
      'Desired state of the server: where it comes from, how it speaks MCP, its environment, sandbox and tools.',
    ),
    specRules: MCPSERVER_SPEC_RULES,
    objectRules: MCPSERVER_OBJECT_RULES,
    status: mcpServerStatusSchema.describe('Observed state of the server, written by the operator.'),
    scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
    columns: [
      ready,
      { name: 'Transport', type: 'string', jsonPath: '.spec.transport' },
      { name: 'Tools', type: 'integer', jsonPath: '.status.toolCount' },
      { name: 'Endpoint', type: 'string', jsonPath: '.status.endpoint' },
      age,
    ],
  });
}

/**
 * The McpCredential CRD as an object: short name `mcpcred`, printer columns TYPE, SECRET, READY, EXPIRES and AGE,
 * and the spec and status schemas of `mcpcredential.ts`.
 * @throws PunkError `UnsupportedSchema` when a schema has no structural form.
 */
export function mcpCredentialCrd(): JsonSchemaProps {
  return crdOf({
    kind: 'McpCredential',
    plural: 'mcpcredentials',
    shortNames: ['mcpcred'],
    description:
      "A credential of the namespace's tenant, held by the gateway's vault as credential <metadata.name>: the keys of a Secret of the same namespace, used as they are or as an OAuth 2.0 grant the gateway refreshes. Servers reference it by name; it never holds a value.",
    spec: mcpCredentialSpecSchema.describe('Desired state of the credential: its type and the Secret holding its values.'),
    specRules: MCPCREDENTIAL_SPEC_RULES,
    status: mcpCredentialStatusSchema.describe(
      'Observed state of the credential, written by the operator: names and times, never a value.',
    ),
    columns: [
      { name: 'Type', type: 'string', jsonPath: '.spec.type' },
      { name: 'Secret', type: 'string', jsonPath: '.spec.secretRef.name' },
      ready,
      { name: 'Expires', type: 'date', jsonPath: '.status.expiresAt' },
      age,
    ],
  });
}

/**
 * The McpPolicy CRD as an object: short name `mcppol`, printer columns PRIORITY, RULES, READY and AGE, the spec
 * and status schemas of `mcppolicy.ts`, and its rules and rate limits keyed by name.
 * @throws PunkError `UnsupportedSchema` when a schema has no structural form.
 */
export function mcpPolicyCrd(): JsonSchemaProps {
  return crdOf({
    kind: 'McpPolicy',
    plural: 'mcppolicies',
    shortNames: ['mcppol'],
    description:
      "Governance rules and rate limits of the namespace's tenant: every use of a tool, resource or prompt is checked against the tenant's policies by ascending priority, then the built-in defaults.",
    spec: mcpPolicySpecSchema.describe('Desired state of the policy: its priority, ordered rules and rate limits.'),
    specRules: MCPPOLICY_SPEC_RULES,
    status: mcpPolicyStatusSchema.describe('Observed state of the policy, written by the operator.'),
    namedLists: [['rules'], ['rateLimits']],
    columns: [
      { name: 'Priority', type: 'integer', jsonPath: '.spec.priority' },
      { name: 'Rules', type: 'integer', jsonPath: '.status.ruleCount' },
      ready,
      age,
    ],
  });
}

/**
 * The McpWorkflow CRD as an object: short name `mcpwf`, printer columns START, READY and AGE, the spec and status
 * schemas of `mcpworkflow.ts` (expressions and node configs free-form: zod checks them, and `validateWorkflowGraph`
 * the graph), its nodes keyed by id, and the rules of `MCPWORKFLOW_SPEC_RULES`.
 * @throws PunkError `UnsupportedSchema` when a schema has no structural form.
 */
export function mcpWorkflowCrd(): JsonSchemaProps {
  return crdOf({
    kind: 'McpWorkflow',
    plural: 'mcpworkflows',
    shortNames: ['mcpwf'],
    description:
      "A workflow of the namespace's tenant: a graph of governed tool calls, branches and an output over an expression IR, served as a tool on /mcp and run through /api/v1/workflows.",
    spec: mcpWorkflowSpecSchema.describe('Desired state of the workflow: its input schema, start node, nodes and output.'),
    specRules: MCPWORKFLOW_SPEC_RULES,
    idLists: [['nodes']],
    status: mcpWorkflowStatusSchema.describe('Observed state of the workflow, written by the operator.'),
    columns: [{ name: 'Start', type: 'string', jsonPath: '.spec.start' }, ready, age],
  });
}

/**
 * Every CRD file of `crds/`: file name to YAML text, the same bytes on every run (a fixed key order,
 * no line folding), each with a header saying where it comes from.
 */
export function renderCrds(): Map<string, string> {
  const render = (source: string, crd: JsonSchemaProps) =>
    `# Generated by \`npm run crds\` from services/lib/src/spec/${source} (services/lib/src/spec/crd.ts). Do not edit.\n` +
    stringify(crd, { lineWidth: 0, aliasDuplicateObjects: false });
  return new Map([
    [MCPSERVER_CRD_FILE, render('mcpserver.ts', mcpServerCrd())],
    [MCPCREDENTIAL_CRD_FILE, render('mcpcredential.ts', mcpCredentialCrd())],
    [MCPPOLICY_CRD_FILE, render('mcppolicy.ts', mcpPolicyCrd())],
    [MCPWORKFLOW_CRD_FILE, render('mcpworkflow.ts', mcpWorkflowCrd())],
  ]);
}
