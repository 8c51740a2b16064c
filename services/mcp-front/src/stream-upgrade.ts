/**
 * A long 2026-07-28 call's answer as an SSE stream (MCP 2026-07-28 basic/transports/streamable-http: the
 * server answers a request with one JSON body or an SSE stream). In response mode `auto` the SDK's per-request
 * transport answers JSON unless the handler sends something before its result, and then switches to SSE, whose
 * `: keepalive` comments keep the connection busy. A call that runs long without progress sends nothing, so
 * proxies that drop idle connections would cut it: after one keep-alive interval without a result, the call's
 * answer is switched to SSE the way the SDK itself does it. Calls answered sooner keep their JSON answer and its
 * HTTP status (a -32021 missing client capability is HTTP 400 only while nothing was streamed).
 */
import type { Transport } from '@modelcontextprotocol/server';
import type { Logger } from '@punk/lib';

/**
 * What this module uses of the SDK's `PerRequestHTTPServerTransport`: its SSE upgrade is not public API, so its
 * absence (another SDK version) is logged once and the answer stays JSON.
 */
interface UpgradableTransport {
  upgradeToSse?: () => void;
  writeCommentFrame?: (comment: string) => void;
  _sse?: unknown;
  _closed?: boolean;
  _deferredResponse?: { settled: boolean };
}

let warned = false;

/**
 * Switches the answer of the request `transport` serves to an SSE stream after `afterMs` unless it was sent or
 * streams already, and writes a first keep-alive comment (the SDK's own follow every interval). Returns the
 * function that cancels it: call it when the call's result is there.
 */
export function streamWhenLong(transport: Transport | undefined, afterMs: number, log: Logger): () => void {
  const timer = setTimeout(() => {
    const exchange = transport as UpgradableTransport | undefined;
    if (exchange?.upgradeToSse === undefined) {
      if (!warned) log.warn('the SDK transport has no SSE upgrade: long 2026-07-28 calls answer JSON, without keep-alive comments');
      warned = true;
      return;
    }
    if (exchange._closed === true || exchange._sse !== undefined || exchange._deferredResponse?.settled !== false) return;
    exchange.upgradeToSse();
    exchange.writeCommentFrame?.('keepalive');
  }, afterMs);
  return () => {
    clearTimeout(timer);
  };
}
