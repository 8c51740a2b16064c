/**
 * The McpServer custom resource (group `mcp.punk.dev`, version `v1alpha1`):
 * the one schema every part of Punk reads. The CRD in `crds/` is generated
 * from it; `punk up` loads the same manifests from files. Field names follow
 * the Kubernetes API conventions (camelCase, lists of named items).
 */
import { z } from 'zod';

export const API_GROUP = 'mcp.punk.dev';
export const API_VERSION = `${API_GROUP}/v1alpha1`;

/** DNS-1035 label: what Kubernetes accepts as a Service name, and what Punk accepts as a server name. */
export const dnsLabel = z
  .string()
  .min(1)
  .max(63)
  .regex(/^[a-z]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1035 label: lower-case letters, digits and -, starting with a letter');

/** A duration such as `500ms`, `30s`, `5m`, `1h`. */
export const durationSchema = z
  .string()
  .regex(/^\d+(ms|s|m|h)$/, 'must be a duration such as 500ms, 30s, 5m or 1h')
  .describe('A duration: a whole number followed by ms, s, m or h.');

/** Converts a duration string (`30s`) to milliseconds. */
export function durationMs(duration: string): number {
  const match = /^(\d+)(ms|s|m|h)$/.exec(duration);
  if (!match) throw new RangeError(`not a duration: ${duration}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'ms' | 's' | 'm' | 'h'];
  return Number(match[1]) * unit;
}

/**
 * Whether `value` is a valid HTTP field value (RFC 9110 §5.5): visible ASCII, spaces, HTAB and obs-text
 * (U+0080-U+00FF), so no CR, LF, NUL or other control character.
 */
export function isHttpFieldValue(value: string): boolean {
  return /^[\t\x20-\x7e\x80-\xff]*$/.test(value);
}

/** The rule a literal header value must follow, as error messages state it. */
export const HTTP_FIELD_VALUE_RULE =
  'must be a valid HTTP field value (RFC 9110 §5.5): visible ASCII, spaces, tabs and Latin-1 letters; no line break or other control character';

/**
 * Header names a server's configuration may not set: the HTTP connection and framing headers (RFC 9110 §7.6.1,
 * RFC 9112), the content negotiation of the MCP transports, and the MCP protocol's own headers, all of which
 * Punk's client sets itself (a forged `Mcp-Session-Id` or a `Content-Length` would break or hijack the connection).
 */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
  'expect',
  'content-type',
  'content-encoding',
  'accept',
  'last-event-id',
  'mcp-session-id',
  'mcp-protocol-version',
  'mcp-method',
  'mcp-name',
]);

/** The rule a header name must follow beyond its syntax, as error messages state it. */
export const RESERVED_HEADER_RULE =
  'is set by Punk itself (connection, framing, content negotiation or MCP protocol header) and cannot be configured';

/** Whether `value` can be an environment variable's value: any string without a NUL (which ends a C string). */
export function isEnvValue(value: string): boolean {
  return !value.includes('\0');
}

/** Prefix of a credential reference in an env or header value (`cred:<id>` or `cred:<id>/<key>`). */
export const REFERENCE_PREFIX = 'cred:';

/** The `cred:<id>` or `cred:<id>/<key>` text of a reference (a `valueFrom.credentialRef` as a value would spell it). */
export function referenceText(ref: { name: string; key?: string | undefined }): string {
  return `${REFERENCE_PREFIX}${ref.name}${ref.key !== undefined ? `/${ref.key}` : ''}`;
}

/** One `env` entry of an McpServer: `{ name, value }` or `{ name, valueFrom }` (a Secret's or an McpCredential's key). */
export const envVarSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
      .describe('Name of the variable.'),
    value: z
      .string()
      .refine(isEnvValue, 'must not contain a NUL character')
      .optional()
      .describe('Literal value. $(VAR) expands a variable defined earlier in the list, as in Kubernetes.'),
    valueFrom: z
      .object({
        secretKeyRef: z
          .object({ name: dnsLabel.describe('Secret name.'), key: z.string().min(1).describe('Key in the Secret.') })
          .strict()
          .optional()
          .describe('A key of a Secret in the same namespace.'),
        credentialRef: z
          .object({
            name: dnsLabel.describe('McpCredential name.'),
            key: z.string().min(1).optional().describe('Key of the credential; its `value` key or only key when absent.'),
          })
          .strict()
          .optional()
          .describe('A key of an McpCredential in the same namespace.'),
      })
      .strict()
      .optional()
      .describe('Where the value comes from, instead of a literal.'),
  })
  .strict()
  .refine((v) => (v.value === undefined) !== (v.valueFrom === undefined), { message: 'set exactly one of value and valueFrom' });

/**
 * `spec.auth.perUser`: the OAuth 2.0 client through which each principal connects their own account at `provider`
 * (authorization code grant with PKCE S256, RFC 6749 §4.1, RFC 7636; redirect URI `<PUNK_PUBLIC_URL>/connect/callback`).
 */
export const perUserAuthSchema = z
  .object({
    provider: z.string().min(1).describe('Name of the account provider, as people know it (e.g. github); shown on the connect page.'),
    authorizationUrl: z
      .url({ protocol: /^https?$/ })
      .describe("The provider's authorization endpoint (RFC 6749 §3.1), where a principal grants access."),
    tokenUrl: z
      .url({ protocol: /^https?$/ })
      .describe("The provider's token endpoint (RFC 6749 §3.2): codes and refresh tokens are exchanged there."),
    clientId: z.string().min(1).describe("Punk's client id at the provider (RFC 6749 §2.2)."),
    clientSecret: z
      .string()
      .regex(/^cred:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\/[-._a-zA-Z0-9]+)?$/, 'must be a credential reference cred:<id> or cred:<id>/<key>')
      .optional()
      .describe("Punk's client secret, a credential reference (cred:<id>, as in spec.headers); absent for a public client."),
    scopes: z.array(z.string().min(1)).default([]).describe('Scopes asked for (RFC 6749 §3.3); the provider decides when empty.'),
  })
  .strict();
export type PerUserAuth = z.infer<typeof perUserAuthSchema>;

/** `spec.auth`: whose identity reaches the upstream on calls (docs/identity.md); also a registration's `auth`. */
export const serverAuthSchema = z
  .object({
    tokenExchange: z
      .object({
        audience: z.string().min(1).describe('`audience` of the exchanged token (RFC 8693 §2.1): the upstream as the issuer names it.'),
        scopes: z
          .array(z.string().min(1))
          .default([])
          .describe('Scopes asked for the exchanged token (RFC 8693 `scope`); the issuer decides when absent.'),
      })
      .strict()
      .describe(
        "Each call reaches the upstream as its caller: mcp-front exchanges the caller's OAuth access token at PUNK_AUTH_ISSUER's token endpoint (RFC 8693) for one of this audience, sent as the call's Authorization: Bearer (docs/identity.md). Callers without an OAuth token (API keys) are refused.",
      )
      .optional(),
    perUser: perUserAuthSchema
      .optional()
      .describe(
        "Each principal connects their own account at the provider once (OAuth 2.0 authorization code with PKCE, RFC 6749 §4.1, RFC 7636); each call then carries that principal's access token as Authorization: Bearer (docs/identity.md). A call of a principal who has not connected is not run: it is told where to connect.",
      ),
  })
  .strict()
  .refine((auth) => !(auth.tokenExchange && auth.perUser), {
    message: 'auth.tokenExchange and auth.perUser exclude each other: declare one',
  });

/** One `headers` entry of a url McpServer: `{ name, value }` or `{ name, valueFrom }`, as an `env` entry. */
export const headerSchema = z
  .object({
    name: z
      .string()
      .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'must be an HTTP header name (RFC 9110 token)')
      .refine((name) => !RESERVED_HEADER_NAMES.has(name.toLowerCase()), RESERVED_HEADER_RULE)
      .describe('Header name (not one Punk sets itself: Host, Content-Length, Content-Type, Accept, Mcp-Session-Id, …).'),
    value: z
      .string()
      .refine(isHttpFieldValue, HTTP_FIELD_VALUE_RULE)
      .optional()
      .describe('Literal value; `cred:<id>` is replaced by the value of that credential at connect time.'),
    valueFrom: envVarSchema.shape.valueFrom,
  })
  .strict()
  .refine((v) => (v.value === undefined) !== (v.valueFrom === undefined), { message: 'set exactly one of value and valueFrom' });

const quantityMap = z
  .object({
    cpu: z.string().optional().describe('CPU quantity, such as 100m.'),
    memory: z.string().optional().describe('Memory quantity, such as 128Mi.'),
  })
  .strict();

const toolOverride = z
  .object({
    name: z.string().min(1).describe('Tool name as the server lists it.'),
    sideEffectLevel: z
      .number()
      .int()
      .min(0)
      .max(4)
      .optional()
      .describe(
        'Declared side-effect level (0 none, 1 read, 2 reversible write, 3 write or send, 4 destructive or payment); wins over heuristics.',
      ),
    annotations: z.record(z.string(), z.unknown()).optional().describe("MCP tool annotations that replace the server's own."),
    streaming: z.boolean().optional().describe('The tool streams progress: answer over SSE when the client accepts it.'),
  })
  .strict();

/**
 * `spec.openapi.refreshInterval`: its default and its minimum (a duration, and the minimum in milliseconds), and the
 * messages of its two rules (zod's and the CRD's CEL rules say the same).
 */
export const OPENAPI_REFRESH_INTERVAL = {
  default: '5m',
  minimum: '5s',
  minimumMs: 5_000,
  tooShort: 'must be at least 5s: the document is fetched again that often',
  urlOnly:
    'refreshInterval applies to a url document only (a file document is watched, content and configMapKeyRef change with the spec): remove it',
} as const;

/**
 * `spec.openapi` of an McpServer: a REST API described by an OpenAPI 3.0 or 3.1 document, whose operations the
 * gateway serves as tools (docs/openapi.md). Exactly one of `url`, `file`, `content` and `configMapKeyRef` names the
 * document; `punk up` makes a relative `file` absolute (beside its manifest), the operator reads a ConfigMap key.
 */
export const openApiSourceSchema = z
  .object({
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .optional()
      .describe('URL of the document (JSON or YAML), fetched through the SSRF guard at every connect.'),
    file: z
      .string()
      .min(1)
      .optional()
      .describe('Path of the document: relative to the manifest under punk up; its relative $refs resolve beside it.'),
    content: z.string().min(1).optional().describe('The document itself (JSON or YAML text); its $refs may name only its own parts.'),
    configMapKeyRef: z
      .object({ name: dnsLabel.describe('ConfigMap name.'), key: z.string().min(1).describe('Key holding the document.') })
      .strict()
      .optional()
      .describe('A key of a ConfigMap in the same namespace (cluster).'),
    baseUrl: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .optional()
      .describe("URL the operations' paths are appended to. Default: the document's first server (relative to the document's url)."),
    operations: z
      .array(z.string().min(1))
      .optional()
      .describe('Only the operations with these operationIds become tools (all when absent).'),
    refreshInterval: durationSchema
      .refine((duration) => durationMs(duration) >= OPENAPI_REFRESH_INTERVAL.minimumMs, { error: OPENAPI_REFRESH_INTERVAL.tooShort })
      .optional()
      .describe(
        `How often a url document is fetched again while the server is connected (If-None-Match / If-Modified-Since; a changed document's tools go through pinning). Default ${OPENAPI_REFRESH_INTERVAL.default}, at least ${OPENAPI_REFRESH_INTERVAL.minimum}.`,
      ),
  })
  .strict()
  .refine(
    (source) => ['url', 'file', 'content', 'configMapKeyRef'].filter((k) => source[k as keyof typeof source] !== undefined).length === 1,
    {
      message: 'set exactly one of url, file, content and configMapKeyRef',
    },
  )
  .refine((source) => source.refreshInterval === undefined || source.url !== undefined, {
    message: OPENAPI_REFRESH_INTERVAL.urlOnly,
    path: ['refreshInterval'],
  });
export type OpenApiSource = z.infer<typeof openApiSourceSchema>;

/** What a `command` that is neither form gets told: the field's two forms, each with an example. */
export const COMMAND_RULE =
  'must be the executable as a non-empty string (command: node, with args: [server.mjs]) or the whole command line as a non-empty list of non-empty strings (command: [node, server.mjs])';

/**
 * A `command` in either form, as the registration API and manifests both take it: the executable alone as a string
 * (its arguments in `args`) or the whole command line as a list (`args` appended). A manifest's spec reads the string
 * as a one-element list; a registration keeps the form it was sent in. The McpServer CRD (a structural schema has one
 * type per field) takes the list.
 */
export const commandSchema = z.union(
  [
    z.string({ error: COMMAND_RULE }).min(1, COMMAND_RULE),
    z
      .array(z.string({ error: 'must be a non-empty string' }).min(1, 'must be a non-empty string'), { error: COMMAND_RULE })
      .min(1, COMMAND_RULE),
  ],
  { error: COMMAND_RULE },
);

/** The `spec` of an McpServer. */
export const mcpServerSpecSchema = z
  .object({
    image: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Container image that runs the server (cluster). Locally, `command` is required with it, and `command` alone runs a local process.',
      ),
    package: z
      .object({
        registry: z.enum(['npm', 'pypi']).default('npm').describe('Package registry.'),
        name: z.string().min(1).describe('Package name.'),
        version: z.string().min(1).optional().describe('Package version; the newest when absent.'),
      })
      .strict()
      .optional()
      .describe("An npm or PyPI package run by Punk's runner."),
    url: z
      .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
      .optional()
      .describe('URL of a remote MCP server; no pod is made.'),
    openapi: openApiSourceSchema
      .optional()
      .describe('A REST API described by an OpenAPI 3.0 or 3.1 document: each operation is a tool; no pod is made (docs/openapi.md).'),
    command: commandSchema
      .transform((command) => (typeof command === 'string' ? [command] : command))
      .optional()
      .describe(
        "Entrypoint, replacing the image's or package's own: the whole command line as a list (`[node, server.mjs]`), or the executable alone as a string (`node`, with `args`; punk up only: the cluster's CRD takes the list). Alone (no image, package or url): a local process, under punk up only.",
      ),
    args: z
      .array(z.string())
      .optional()
      .describe('Arguments. $(VAR) expands an environment variable of `env`, and $(PORT) the port of an HTTP server Punk starts.'),
    transport: z
      .enum(['stdio', 'streamable-http', 'sse'])
      .optional()
      .describe('How the server speaks MCP. Default: streamable-http with url, else stdio.'),
    port: z
      .number()
      .int()
      .min(1)
      .max(65535)
      .optional()
      .describe(
        'Port the server listens on, for streamable-http and sse servers that Punk starts; $(PORT) in args and env expands to it. When absent, punk up picks a free loopback port, and in the cluster the pod listens on 8080.',
      ),
    path: z
      .string()
      .startsWith('/')
      .default('/mcp')
      .describe('HTTP path of the MCP endpoint (streamable-http) or of the SSE stream (sse).'),
    env: z
      .array(envVarSchema)
      .default([])
      .describe(
        "Environment of the server process; nothing else of Punk's environment reaches it. A literal `cred:<id>` is replaced by that credential's value at start.",
      ),
    headers: z
      .array(headerSchema)
      .optional()
      .describe(
        'HTTP headers sent to a url server, or with every operation of an openapi server, on every request (e.g. Authorization: cred:<id>).',
      ),
    auth: serverAuthSchema.optional().describe("Whose identity reaches the upstream on calls; Punk's own (spec.headers) when absent."),
    replicas: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe(
        'Pod replicas (cluster; the scale subresource: kubectl scale, a HorizontalPodAutoscaler). 0: scaled to zero, the egress proxy too, and the gateway answers calls at once that the server is scaled to zero.',
      ),
    service: z
      .object({
        clusterIP: z
          .boolean()
          .default(false)
          .describe(
            "Give the server's Service a cluster IP. Default false: the Service is headless (clusterIP None), its DNS name resolves to the ready pods' addresses and no IP is allocated.",
          ),
      })
      .strict()
      .optional()
      .describe("The server's Service (cluster; image and package servers)."),
    resources: z
      .object({
        requests: quantityMap.optional().describe('Resources the scheduler reserves for the container.'),
        limits: quantityMap
          .optional()
          .describe('Most the container may use: CPU is throttled above it, memory above it kills the container.'),
      })
      .strict()
      .optional()
      .describe('Compute resources of the server container.'),
    sandbox: z
      .object({
        egress: z
          .array(
            z
              .object({
                host: z.string().min(1).optional().describe('DNS name the server may reach.'),
                cidr: z.string().min(1).optional().describe('Address range the server may reach.'),
                ports: z.array(z.number().int().min(1).max(65535)).optional().describe('Ports; all when absent.'),
              })
              .strict()
              .refine((e) => (e.host === undefined) !== (e.cidr === undefined), { message: 'set exactly one of host and cidr' }),
          )
          .default([])
          .describe('Destinations the server may reach; everything else is denied.'),
        runtimeClassName: z.string().optional().describe('RuntimeClass of the pod (gVisor, Kata); podTemplate cannot replace it.'),
        volumes: z
          .array(z.record(z.string(), z.unknown()))
          .optional()
          .describe(
            "Extra pod volumes, mounted at /mnt/<name> (the restricted Pod Security Standard's volume types; no projected serviceAccountToken).",
          ),
      })
      .strict()
      .optional()
      .describe('Sandbox of the server.'),
    podTemplate: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        'A partial PodTemplateSpec (metadata and spec) merged last into the pods the operator makes for the server (cluster only; `punk up` ignores it). ' +
          "Merge rule: maps are merged key by key; scalars and lists replace Punk's, except these lists, merged item by item on a key: " +
          "containers and initContainers by name (the server's container is `server`; a container of the same name is merged field by field, a new one starts from Punk's container securityContext), " +
          "volumes, env, imagePullSecrets and resourceClaims by name, volumeMounts by mountPath, ports by containerPort (an item of the same key replaces Punk's whole, a new one is appended). " +
          "Refused, because they would break the sandbox (the Pod Security Standards' restricted profile): null values, hostNetwork, hostPID, hostIPC, hostPort, sysctls, " +
          'volume types other than configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected and secret, ' +
          'serviceAccountName and automountServiceAccountToken true, runAsUser, runAsGroup or fsGroup 0, runAsNonRoot false, privileged, allowPrivilegeEscalation true, ' +
          'readOnlyRootFilesystem false, added capabilities other than NET_BIND_SERVICE, a capabilities drop list without ALL, procMount other than Default, ' +
          'Unconfined seccomp or AppArmor profiles (and the legacy seccomp/AppArmor annotations with a value other than runtime/default, docker/default or localhost/<profile>), ' +
          'projected serviceAccountToken sources, a runtimeClassName other than sandbox.runtimeClassName when that is set, ' +
          "seLinuxOptions with a user, role or non-container type, and other values for Punk's labels or its mcp.punk.dev/secret-checksum annotation.",
      ),
    tools: z
      .object({
        allow: z.array(z.string().min(1)).optional().describe('Only these tools are served (all when absent).'),
        deny: z.array(z.string().min(1)).optional().describe('These tools are never served.'),
        overrides: z.array(toolOverride).default([]).describe('Per-tool side-effect level and annotation overrides.'),
        pinning: z
          .enum(['serve', 'hide', 'approval'])
          .optional()
          .describe(
            "When a tool's definition changes from the pinned one: serve the new one, hide the tool until an admin accepts it, or require approval per call. Default: the gateway's PUNK_TOOL_PINNING.",
          ),
      })
      .strict()
      .optional()
      .describe('Which tools are served, and how they are classified.'),
    protocolEra: z
      .enum(['2025', '2026'], { error: "protocolEra is '2025' or '2026', quoted (in YAML a bare 2026 is a number)" })
      .optional()
      .describe(
        "Pins the MCP protocol era Punk speaks to the server: '2025' (initialize) or '2026' (2026-07-28). Default: the era of each client's request where the server speaks both (one connection per era), else the one it speaks.",
      ),
    sessionMode: z
      .enum(['shared', 'per-client'])
      .default('shared')
      .describe('One upstream session shared by all clients, or one per client session.'),
    timeout: durationSchema
      .optional()
      .describe(
        "Deadline of one call to the server, end to end: the gateway's call to the server and mcp-front's wait for it. Default: PUNK_CALL_TIMEOUT_MS (60s).",
      ),
    startTimeout: durationSchema
      .optional()
      .describe(
        "How long a server that Punk starts or connects to may take to complete its MCP handshake (e.g. 120s). Default: the gateway's PUNK_SERVER_START_TIMEOUT_MS.",
      ),
  })
  .strict()
  .superRefine((spec, ctx) => {
    const sources = (['image', 'package', 'url', 'openapi'] as const).filter((k) => spec[k] !== undefined);
    // `command` alone is a local process (`punk up` runs it as a child); the cluster's CRD requires a source.
    if (sources.length > 1) {
      ctx.addIssue({
        code: 'custom',
        path: sources.slice(1, 2),
        message: `set exactly one of image, package, url and openapi (found ${sources.join(', ')})`,
      });
    } else if (sources.length === 0 && spec.command === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: [],
        message: 'set exactly one of image, package, url and openapi (found none), or only command for a local process under punk up',
      });
    }
    if (spec.url !== undefined && (spec.command !== undefined || spec.args !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'command and args apply only to image and package servers, not to url' });
    }
    if (spec.transport === 'sse' && spec.protocolEra === '2026') {
      ctx.addIssue({
        code: 'custom',
        path: ['protocolEra'],
        message: 'an sse server speaks the 2025 era only: drop protocolEra, or set transport: streamable-http',
      });
    }
    if (spec.url !== undefined && spec.transport === 'stdio') {
      ctx.addIssue({ code: 'custom', path: ['transport'], message: 'a url server speaks streamable-http or sse, not stdio' });
    }
    if (spec.url === undefined && spec.openapi === undefined && spec.headers !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['headers'], message: 'headers apply only to url and openapi servers' });
    }
    if (spec.auth !== undefined && (spec.openapi !== undefined || transportOf(spec) === 'stdio')) {
      ctx.addIssue({
        code: 'custom',
        path: ['auth'],
        message: 'auth applies only to servers Punk reaches over HTTP: a url server, or transport streamable-http or sse',
      });
    }
    if (spec.openapi !== undefined) {
      for (const field of ['command', 'args', 'transport', 'port', 'protocolEra'] as const) {
        if (spec[field] !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: [field],
            message: `${field} does not apply to an openapi server (Punk serves its tools itself)`,
          });
      }
    }
  });
export type McpServerSpec = z.infer<typeof mcpServerSpecSchema>;

/** Object metadata (the subset Punk reads). */
export const objectMetaSchema = z.looseObject({
  name: dnsLabel,
  namespace: dnsLabel.optional(),
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  generation: z.number().int().optional(),
  uid: z.string().optional(),
});

/** A whole custom resource object of `kind` (group `mcp.punk.dev`, v1alpha1) with `spec`; its status is read as it is. */
export function customResourceSchema<K extends string, S extends z.ZodType>(kind: K, spec: S) {
  return z.object({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(kind),
    metadata: objectMetaSchema,
    spec,
    status: z.record(z.string(), z.unknown()).optional(),
  });
}

/**
 * The suffix of the names of a server's egress proxy children (`<name>-egress`): an McpServer's own name may not
 * end in it, so those children never share a name with another McpServer's.
 */
export const EGRESS_PROXY_SUFFIX = '-egress';

/**
 * A whole McpServer object. Its name may not end in {@link EGRESS_PROXY_SUFFIX}, and has at most 56 characters
 * when the server needs an egress proxy (a package server, or a `host` in `sandbox.egress`), so that
 * `<name>-egress` is a DNS-1035 label too.
 */
export const mcpServerSchema = customResourceSchema('McpServer', mcpServerSpecSchema).superRefine((server, ctx) => {
  const name = server.metadata.name;
  if (name.endsWith(EGRESS_PROXY_SUFFIX)) {
    ctx.addIssue({
      code: 'custom',
      path: ['metadata', 'name'],
      message: `must not end in ${EGRESS_PROXY_SUFFIX}: Punk names the egress proxy of McpServer <name> <name>${EGRESS_PROXY_SUFFIX}`,
    });
  }
  const proxied = server.spec.package !== undefined || (server.spec.sandbox?.egress ?? []).some((entry) => entry.host !== undefined);
  if (proxied && name.length + EGRESS_PROXY_SUFFIX.length > 63) {
    ctx.addIssue({
      code: 'custom',
      path: ['metadata', 'name'],
      message: `must have at most ${63 - EGRESS_PROXY_SUFFIX.length} characters when the server needs an egress proxy (a package, or a host in spec.sandbox.egress): its children are named <name>${EGRESS_PROXY_SUFFIX}, at most 63 characters`,
    });
  }
});
export type McpServer = z.infer<typeof mcpServerSchema>;

/** The effective transport of a server (`transport`, else its default). */
export function transportOf(spec: McpServerSpec): 'stdio' | 'streamable-http' | 'sse' {
  return spec.transport ?? (spec.url !== undefined ? 'streamable-http' : 'stdio');
}

/**
 * One condition of a status, with the fields and limits of Kubernetes' `metav1.Condition`
 * (k8s.io/apimachinery/pkg/apis/meta/v1/types.go): `type` CamelCase (Ready, Available, Progressing,
 * Degraded), `status` True | False | Unknown, `reason` a CamelCase word for machines, `message` for people,
 * `lastTransitionTime` an RFC 3339 time that changes only when `status` changes.
 */
export const conditionSchema = z
  .object({
    type: z
      .string()
      .max(316)
      .regex(/^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$/)
      .describe('Type of the condition, in CamelCase: Ready, Available, Progressing or Degraded.'),
    status: z.enum(['True', 'False', 'Unknown']).describe('Status of the condition: True, False or Unknown.'),
    observedGeneration: z.number().int().min(0).optional().describe('metadata.generation of the object the condition was set from.'),
    lastTransitionTime: z.iso.datetime({ offset: true }).describe('When the condition last changed from one status to another (RFC 3339).'),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      .describe('Why the condition is in its status, as a CamelCase word for programs (ImageMissing, SecretMissing, CrashLoopBackOff, …).'),
    message: z.string().max(32768).describe('Why the condition is in its status, for people; may be empty.'),
  })
  .strict();
export type Condition = z.infer<typeof conditionSchema>;

/** The `status` of an McpServer, written by the operator: what it observed, never what it hopes. */
export const mcpServerStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('metadata.generation of the spec this status was computed from.'),
    conditions: z
      .array(conditionSchema)
      .optional()
      .describe('Conditions Ready, Available, Progressing and Degraded; at most one of each type.'),
    endpoint: z
      .string()
      .optional()
      .describe(
        'Where MCP clients reach this server through Punk: <PUNK_PUBLIC_URL>/servers/<namespace>/<name>/mcp, or that path alone when the operator has no PUNK_PUBLIC_URL.',
      ),
    upstreamUrl: z.string().optional().describe("URL the gateway connects to: the server pod's Service, or the url of a remote server."),
    toolCount: z.number().int().min(0).optional().describe('Number of tools of the last live listing through the gateway.'),
    tools: z
      .array(
        z
          .object({
            name: z.string().min(1).describe('Tool name as the server lists it.'),
            sideEffectLevel: z
              .number()
              .int()
              .min(0)
              .max(4)
              .optional()
              .describe('Side-effect level the gateway classified the tool at (0 none to 4 destructive or payment).'),
          })
          .strict(),
      )
      .optional()
      .describe('Tools of the last live listing through the gateway.'),
    warnings: z
      .array(z.string())
      .optional()
      .describe(
        'What is wrong but served, from the last live listing, each naming where (`paths./pets/{id}.get: no operationId; named get_pets_id`).',
      ),
    lastError: z
      .string()
      .optional()
      .describe('Last error met while starting, connecting to or listing the server; never contains a secret value.'),
    replicas: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("Pods of the server's Deployment now (status.replicas of the scale subresource); absent for a url server."),
    selector: z
      .string()
      .optional()
      .describe("Label selector of the server's pods (the scale subresource's, for a HorizontalPodAutoscaler); absent for a url server."),
  })
  .strict();
export type McpServerStatus = z.infer<typeof mcpServerStatusSchema>;
