/**
 * The error of an McpServer spec that the API server accepted but Punk cannot run (a port clash, a podTemplate
 * that breaks the sandbox, a stdio image without a command, …). The reconciler reports it as the Degraded
 * condition with `reason` and this message; it never retries the same generation for it.
 */
import { PunkError } from '@punk/lib/controller';

/** Why a spec cannot be run: the Degraded condition's reason. */
export type SpecErrorReason = 'InvalidSpec' | 'CredentialMissing' | 'SecretKeyMissing';

/**
 * A spec error naming its field: `field` is a path from the object's root (`spec.port`,
 * `spec.podTemplate.spec.containers[0].securityContext.privileged`) and the message starts with it.
 */
export class SpecError extends PunkError {
  /** Path of the offending field, from the object's root (`spec.env[2].valueFrom.credentialRef.name`). */
  readonly field: string;
  /** CamelCase reason for the Degraded condition: InvalidSpec, CredentialMissing (an unknown McpCredential), SecretKeyMissing. */
  readonly reason: SpecErrorReason;

  /** @param message what is wrong and what to do, without the field (it is prefixed: `<field>: <message>`). */
  constructor(field: string, message: string, reason: SpecErrorReason = 'InvalidSpec') {
    super(reason, `${field}: ${message}`, { field });
    this.name = 'SpecError';
    this.field = field;
    this.reason = reason;
  }
}
