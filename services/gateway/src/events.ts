/**
 * The gateway's ledger events: built here, appended with `appendLedgerEvent`.
 */
import { randomUUID } from 'node:crypto';
import { lifecycleRunId, type LedgerEvent, type LedgerEventType, type Principal } from '@punk/lib';

/** Who and what a relayed call belongs to. */
export interface CallContext {
  tenant: string;
  server: string;
  runId: string;
  principal: Principal;
  sessionId?: string | undefined;
}

/** A new gateway event of a call, with a fresh id and the current time. */
export function callEvent(type: LedgerEventType, context: CallContext, data: Record<string, unknown>): LedgerEvent {
  return {
    id: randomUUID(),
    type,
    tenant: context.tenant,
    runId: context.runId,
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    principal: context.principal,
    ...(context.sessionId !== undefined && { sessionId: context.sessionId }),
    server: context.server,
    data,
  };
}

/** A `server.state_changed` event. */
export function stateChangedEvent(namespace: string, name: string, state: string, lastError: string | undefined): LedgerEvent {
  return {
    id: randomUUID(),
    type: 'server.state_changed',
    tenant: namespace,
    runId: lifecycleRunId(namespace, name),
    occurredAt: new Date().toISOString(),
    source: 'gateway',
    server: name,
    data: { state, ...(lastError !== undefined && { lastError }) },
  };
}

const SUMMARY_TEXT_CHARS = 500;

/**
 * A short summary of an MCP result for the ledger: the content item types and
 * the beginning of the text (tool results and prompts), or the resource URIs.
 * `redact` (the answering connection's `Connection.redact`) hides secret values from the text before it is
 * shortened, so no secret survives in part (an upstream may echo the credentials it was sent).
 */
export function summarizeResult(
  result: Record<string, unknown>,
  redact: (text: string) => string = (text) => text,
): Record<string, unknown> {
  const items = (
    Array.isArray(result.content)
      ? result.content
      : Array.isArray(result.contents)
        ? result.contents
        : Array.isArray(result.messages)
          ? result.messages
          : []
  ) as Record<string, unknown>[];
  const texts: string[] = [];
  const types: string[] = [];
  for (const item of items) {
    const content = (item.content && typeof item.content === 'object' ? item.content : item) as Record<string, unknown>;
    types.push(typeof content.type === 'string' ? content.type : typeof content.uri === 'string' ? 'resource' : 'unknown');
    if (typeof content.text === 'string') texts.push(content.text);
  }
  const text = redact(texts.join('\n'));
  return {
    items: items.length,
    types,
    ...(text.length > 0 && { text: text.length > SUMMARY_TEXT_CHARS ? `${text.slice(0, SUMMARY_TEXT_CHARS)}…` : text }),
    ...(result.structuredContent !== undefined && { structured: true }),
  };
}
