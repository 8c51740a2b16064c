/**
 * The McpCredential custom resource (group `mcp.punk.dev`, version `v1alpha1`): a reference to a Secret
 * of the same namespace whose keys the gateway's vault holds as credential `<metadata.name>` of the
 * namespace's tenant. The resource never holds a value; its status shows expiry and refresh health only.
 * In a cluster the values come from `secretRef`; under `punk up`, which has no Secrets, from `values`
 * (environment variables and files): each side refuses the other's field, naming the one to use.
 */
import { z } from 'zod';
import { conditionSchema, customResourceSchema, dnsLabel } from './mcpserver.js';

/** A key of a credential: a Secret data key. */
const credentialKey = z.string().regex(/^[A-Za-z0-9._-]{1,253}$/, 'must be a Secret data key');

/** The `spec` of an McpCredential. */
export const mcpCredentialSpecSchema = z
  .object({
    type: z
      .enum(['static', 'oauth2'])
      .default('static')
      .describe(
        "static: the Secret's keys are used as they are. oauth2: an RFC 6749 grant sent as a bearer token and refreshed by the gateway.",
      ),
    secretRef: z
      .object({
        name: dnsLabel.describe('Name of the Secret in the same namespace.'),
        keys: z.array(credentialKey).min(1).optional().describe('Only these keys of the Secret; all of them when absent.'),
      })
      .strict()
      .optional()
      .describe(
        'The Secret that holds the values (in a cluster). For oauth2 its keys are among access_token, refresh_token, expires_at (epoch milliseconds), client_id, client_secret, token_url and scope.',
      ),
    values: z
      .array(
        z
          .object({
            key: credentialKey.describe('Key of the credential, as a Secret key would name it.'),
            valueFrom: z
              .object({
                env: z
                  .string()
                  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')
                  .optional()
                  .describe('An environment variable of the punk up process.'),
                file: z
                  .string()
                  .min(1)
                  .optional()
                  .describe("A file's contents, one trailing newline removed; a relative path is relative to the manifest's file."),
              })
              .strict()
              .refine((v) => (v.env === undefined) !== (v.file === undefined), { message: 'set exactly one of env and file' })
              .describe('Where the value is read from.'),
          })
          .strict(),
      )
      .min(1)
      .optional()
      .describe(
        'The values under punk up, which has no Secrets: each key read from an environment variable or a file. A cluster uses secretRef instead.',
      ),
    oauth2: z
      .object({
        tokenUrl: z
          .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
          .optional()
          .describe("Token endpoint (RFC 6749 §3.2); overrides the Secret's token_url."),
        clientId: z.string().min(1).optional().describe("Client identifier (RFC 6749 §2.2); overrides the Secret's client_id."),
        scopes: z.array(z.string().min(1)).optional().describe("Scopes requested on refresh (RFC 6749 §3.3); override the Secret's scope."),
      })
      .strict()
      .optional()
      .describe('Non-secret settings of an oauth2 credential.'),
  })
  .strict()
  .superRefine((spec, ctx) => {
    if ((spec.secretRef === undefined) === (spec.values === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['secretRef'],
        message: 'set exactly one of secretRef (a Secret, in a cluster) and values (environment variables or files, under punk up)',
      });
    }
    spec.values?.forEach((entry, i) => {
      if (spec.values!.findIndex((other) => other.key === entry.key) < i)
        ctx.addIssue({ code: 'custom', path: ['values', i, 'key'], message: `duplicate key ${entry.key}` });
    });
    if (spec.oauth2 !== undefined && spec.type !== 'oauth2') {
      ctx.addIssue({ code: 'custom', path: ['oauth2'], message: 'oauth2 settings apply only to type oauth2' });
    }
  });
export type McpCredentialSpec = z.infer<typeof mcpCredentialSpecSchema>;

/** The `status` of an McpCredential, written by the operator: names and times only, never a value. */
export const mcpCredentialStatusSchema = z
  .object({
    observedGeneration: z.number().int().min(0).optional().describe('metadata.generation of the spec this status was computed from.'),
    conditions: z
      .array(conditionSchema)
      .optional()
      .describe(
        "Conditions Ready (the vault holds the Secret's current values) and Degraded (Secret missing, key missing, refresh failing).",
      ),
    keys: z.array(z.string()).optional().describe('Names of the keys the vault holds.'),
    expiresAt: z.iso.datetime({ offset: true }).optional().describe('When the current access token expires (oauth2).'),
    lastRefreshTime: z.iso.datetime({ offset: true }).optional().describe('When the gateway last refreshed the token (oauth2).'),
    refreshHealth: z
      .enum(['Healthy', 'Failing', 'NotApplicable'])
      .optional()
      .describe('Whether the last refresh succeeded (oauth2); NotApplicable for static credentials.'),
    lastError: z.string().optional().describe('Last error met applying or refreshing the credential; never contains a secret value.'),
  })
  .strict();
export type McpCredentialStatus = z.infer<typeof mcpCredentialStatusSchema>;

/** A whole McpCredential object. */
export const mcpCredentialSchema = customResourceSchema('McpCredential', mcpCredentialSpecSchema);
export type McpCredential = z.infer<typeof mcpCredentialSchema>;
