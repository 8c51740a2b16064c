/**
 * The `requestState` Punk mints for a 2026-07-28 client when it bridges an
 * upstream's server-to-client request into an `input_required` result (MCP
 * 2026-07-28 basic/patterns/mrtr, server requirements 4-5): self-contained
 * and signed, so the client's retry may land on any front replica that holds
 * the same key.
 *
 * Wire shape: `v1.<payload>.<signature>`, where `payload` is the base64url
 * encoding of the JSON {@link RequestStatePayload} and `signature` the
 * base64url HMAC-SHA256 of `v1.<payload>` under the signing key
 * (`PUNK_SESSION_SIGNING_KEY`). Signed, not encrypted: the client can read
 * the payload, which holds no secret (ids, names, an expiry).
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import type { Logger } from '@punk/lib';

/** What a `requestState` minted by Punk says. */
export interface RequestStatePayload {
  /**
   * The pending upstream request the client's `inputResponses` answer: a UUID, also the `inputRequests`
   * key. It names the gateway replica holding the call, through the subject
   * `punk.client-request.<requestId>.answer` that only that replica serves.
   */
  requestId: string;
  /**
   * Set when the `input_required` was the upstream's own (a 2026-07-28 upstream's, passed through by the gateway;
   * `requestId` is then empty): the retry is a new call carrying the client's `inputResponses` and this, the
   * upstream's `requestState` byte for byte (empty when it sent none).
   */
  upstreamState?: string;
  /**
   * With `upstreamState`: the gateway replica whose server process answered the `input_required`
   * (`UPSTREAM_INPUT_INSTANCE`); the retry goes to it, as the upstream's state may be that process's own.
   */
  instance?: string;
  /**
   * The call the retry continues (the `callId` of its gateway channel): closing a retry's response stream
   * cancels it (`punk.call.<callId>.cancel`), and its progress is on `punk.front.<front>.call.<callId>.out`.
   */
  callId?: string;
  /** The front replica whose channel the call's gateway replica publishes on (`front` of that channel). */
  front?: string;
  /** The client request being retried: `tools/call`, `resources/read` or `prompts/get`. */
  method: string;
  /** The tool or prompt name, or the resource URI, as the client named it. */
  target: string;
  /** Tenant of the front that minted the state. */
  tenant: string;
  /** `subject` of the principal the call ran as; a retry by another principal is refused. */
  principal: string;
  /** Expiry, in milliseconds since the Unix epoch. */
  expiresAt: number;
}

/** Default lifetime of a minted `requestState`: 5 minutes, the default bound of a pending request on the gateway. */
export const DEFAULT_REQUEST_STATE_TTL_MS = 5 * 60_000;

const VERSION = 'v1';

/** Smallest accepted signing key, in bytes (HMAC-SHA256 wants at least its output size). */
export const MIN_SIGNING_KEY_BYTES = 32;

/**
 * The signing key of `requestState`: the configured `PUNK_SESSION_SIGNING_KEY` (UTF-8), or, when none is
 * configured, 32 random bytes of this process, with a warning that retries reaching another process fail.
 * @throws RangeError naming the variable when a configured key is shorter than {@link MIN_SIGNING_KEY_BYTES} bytes.
 */
export function signingKeyOf(configured: string | undefined, log: Logger): Buffer {
  if (configured !== undefined) {
    const key = Buffer.from(configured, 'utf8');
    if (key.length < MIN_SIGNING_KEY_BYTES)
      throw new RangeError(`PUNK_SESSION_SIGNING_KEY must be at least ${MIN_SIGNING_KEY_BYTES} bytes; it has ${key.length}`);
    return key;
  }
  log.warn(
    'PUNK_SESSION_SIGNING_KEY is not set: this process signs requestState with a random key of its own, so a 2026-07-28 retry (input_required) that reaches another process will fail; set the same key on every mcp-front replica',
  );
  return randomBytes(32);
}

/** Mints and verifies `requestState` strings ({@link RequestStatePayload}) under one key. */
export class RequestStateCodec {
  /**
   * @param key HMAC-SHA256 key, at least {@link MIN_SIGNING_KEY_BYTES} bytes (see {@link signingKeyOf}).
   * @param ttlMs lifetime of a minted state, in milliseconds.
   */
  constructor(
    private readonly key: Buffer,
    readonly ttlMs: number = DEFAULT_REQUEST_STATE_TTL_MS,
  ) {}

  /** Seals a payload; `expiresAt` is now plus the codec's lifetime. */
  mint(fields: Omit<RequestStatePayload, 'expiresAt'>, now: number = Date.now()): string {
    const payload: RequestStatePayload = { ...fields, expiresAt: now + this.ttlMs };
    const body = `${VERSION}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    return `${body}.${this.sign(body).toString('base64url')}`;
  }

  /**
   * Opens a `requestState` a client echoed back.
   * @throws ProtocolError -32602 (Invalid params) with a message naming the problem: malformed, a signature
   *   that does not verify (altered, or minted with another key), or expired (with the expiry time).
   */
  verify(state: string, now: number = Date.now()): RequestStatePayload {
    const parts = state.split('.');
    if (parts.length !== 3 || parts[0] !== VERSION)
      throw invalid('requestState is malformed: it is not a state Punk minted (expected v1.<payload>.<signature>)');
    const body = `${parts[0]}.${parts[1]}`;
    const given = Buffer.from(parts[2]!, 'base64url');
    const expected = this.sign(body);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw invalid('requestState signature does not verify: the state was altered, or was minted with another PUNK_SESSION_SIGNING_KEY');
    }
    let payload: RequestStatePayload;
    try {
      payload = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as RequestStatePayload;
    } catch {
      throw invalid('requestState is malformed: its payload is not JSON');
    }
    if (typeof payload.expiresAt !== 'number' || typeof payload.requestId !== 'string')
      throw invalid('requestState is malformed: its payload lacks requestId or expiresAt');
    if (payload.expiresAt <= now)
      throw invalid(
        `requestState expired at ${new Date(payload.expiresAt).toISOString()}: call again without requestState and inputResponses`,
      );
    return payload;
  }

  private sign(body: string): Buffer {
    return createHmac('sha256', this.key).update(body).digest();
  }
}

function invalid(message: string): ProtocolError {
  return new ProtocolError(ProtocolErrorCode.InvalidParams, message, { reason: 'invalid_request_state' });
}
