/**
 * Multi Round-Trip Requests of a 2026-07-28 upstream (MCP 2026-07-28
 * basic/patterns/mrtr), per call. For a 2026-07-28 client the upstream's
 * `input_required` result is passed through as it is (its keys, its
 * `requestState`; the client's retry comes back as a new call carrying the
 * answers), so nothing is held. For a 2025-era client the gateway asks that
 * call's client through its {@link ClientLink} (requests on its stream) and
 * retries the call with the answers. Nothing is guessed from the calls in
 * flight, unlike the server-to-client requests of a shared 2025-era
 * connection.
 */
import { CLIENT_CAPABILITIES_META_KEY, ProtocolErrorCode } from '@modelcontextprotocol/client';
import { PunkError, redactJson } from '@punk/lib';
import { CAPABILITY_OF, type ClientLink } from './client-channel.js';
import type { ProtocolEra } from './connect.js';

/** Most `input_required` rounds of one call before the gateway gives up. */
export const MAX_INPUT_ROUNDS = 8;

/** The params a retry adds to the original request (MCP 2026-07-28 `InputResponseRequestParams`). */
export interface InputRetry {
  inputResponses: Record<string, unknown>;
  requestState?: string;
}

/** How one call treats the `input_required` results of a 2026-07-28 upstream. */
export interface InputRequiredMode {
  /**
   * Reply with the upstream's `input_required` as it is (its keys and `requestState`, marked
   * {@link UPSTREAM_INPUT_REQUIRED}) for a 2026-07-28 client to answer itself, instead of asking the call's link.
   */
  passThrough: boolean;
  /** The client's answers and the upstream's `requestState`, when the call is such a client's retry. */
  retry?: InputRetry;
  /** The protocol era of the call's client (from its channel): the call goes out in that era where the upstream speaks it. */
  era?: ProtocolEra;
}

/** The mode of a gateway call: pass-through for a 2026-07-28 client (channel era `2026`), with the retry it carries and its client's era. */
export function inputModeOf(request: {
  channel?: { era?: string | undefined } | undefined;
  inputResponses?: Record<string, unknown> | undefined;
  requestState?: string | undefined;
}): InputRequiredMode {
  const retry = request.inputResponses && {
    inputResponses: request.inputResponses,
    ...(request.requestState !== undefined && { requestState: request.requestState }),
  };
  const era: ProtocolEra | undefined = request.channel && (request.channel.era === '2026' ? 'modern' : 'legacy');
  return { passThrough: request.channel?.era === '2026', ...(retry && { retry }), ...(era && { era }) };
}

/**
 * The `_meta` a call to a 2026-07-28 upstream carries: `meta` with the client capabilities of the call's
 * client (`io.modelcontextprotocol/clientCapabilities`: those of `elicitation`, `sampling` and `roots` it
 * declared; none without a client), so the upstream asks only for input the client can give, or refuses
 * with -32021 itself. Keys the caller set win over the SDK's own envelope.
 */
export function metaForModernUpstream(meta: Record<string, unknown> | undefined, link: ClientLink | undefined): Record<string, unknown> {
  const capabilities: Record<string, object> = {};
  for (const [method, capability] of Object.entries(CAPABILITY_OF)) if (link?.supports(method)) capabilities[capability] = {};
  return { ...meta, [CLIENT_CAPABILITIES_META_KEY]: capabilities };
}

/**
 * Asks the client of the call for every input request of `result` (an `input_required` result), one after
 * the other, and resolves with the params of the retry: the answers under the upstream's keys and its
 * `requestState`, echoed byte for byte. `hide` masks the connection's secret values in the requests the client is sent.
 * @throws PunkError `UpstreamError` (mcpCode -32603) when the call has no client, or its client did not declare
 *   what a request needs; the client's own ProtocolError when it refuses.
 */
export async function answerInputRequests(
  server: string,
  result: Record<string, unknown>,
  link: ClientLink | undefined,
  hide: (text: string) => string,
): Promise<InputRetry> {
  const requests = (result['inputRequests'] ?? {}) as Record<string, { method: string; params?: Record<string, unknown> }>;
  const inputResponses: Record<string, unknown> = {};
  for (const [key, request] of Object.entries(requests)) {
    if (!link?.supports(request.method)) {
      const why = link ? 'its client did not declare the capability' : 'the call has no client to ask';
      throw new PunkError('UpstreamError', `server ${server} asked for input ${key} (${request.method}), but ${why}`, {
        mcpCode: ProtocolErrorCode.InternalError,
      });
    }
    inputResponses[key] = await link.request(request.method, redactJson(request.params, hide));
  }
  const requestState = result['requestState'];
  return { inputResponses, ...(typeof requestState === 'string' && { requestState }) };
}
