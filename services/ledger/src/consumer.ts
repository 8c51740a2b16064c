import {
  consumers,
  errorMessage,
  ledgerEventSchema,
  parseMessage,
  streams,
  traceLedgerBatch,
  type Bus,
  type BusConsumer,
  type LedgerEvent,
  type Logger,
  type StreamMessage,
} from '@punk/lib';
import type { LedgerStore, RejectedMessage } from './store.js';

/** Most stream messages written in one transaction. */
export const LEDGER_BATCH_SIZE = 100;

/** SQLSTATE class 22 (data exception, for example a NUL character jsonb refuses): the message, not the database, is at fault. */
function isDataError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.startsWith('22');
}

/**
 * Starts the durable consumer `ledger-writer` on the ledger stream. Each batch
 * is validated against `ledgerEventSchema` and written in one transaction:
 * malformed messages go to `ledger.rejected_messages` (logged as errors) and
 * are acknowledged with the rest, so they neither block the stream nor vanish.
 * When the database refuses an event's content (SQLSTATE class 22), the batch is
 * retried event by event and the refused ones are rejected the same way. `maxBatch` (default
 * {@link LEDGER_BATCH_SIZE}) bounds a batch: on the in-process bus, every event waiting at that moment up to it
 * goes in one transaction (group commit). Any other
 * failure throws, leaving the batch unacknowledged for redelivery; ids already
 * stored are skipped then, so nothing is written twice.
 */
export async function startLedgerConsumer(bus: Bus, store: LedgerStore, log: Logger, maxBatch = LEDGER_BATCH_SIZE): Promise<BusConsumer> {
  return bus.consume(
    streams.ledger.name,
    consumers.ledgerWriter,
    (messages) => traceLedgerBatch(messages, () => writeBatch(store, log, messages)),
    { maxBatch },
  );
}

function rejection(message: StreamMessage, error: unknown): RejectedMessage {
  return { msgId: message.msgId, streamSeq: message.seq, subject: message.subject, error: errorMessage(error), payload: message.data };
}

/** Writes one delivered batch; resolves when it is stored (then the bus acknowledges it). */
export async function writeBatch(store: LedgerStore, log: Logger, messages: StreamMessage[]): Promise<void> {
  const events: Array<{ message: StreamMessage; event: LedgerEvent }> = [];
  const rejected: RejectedMessage[] = [];
  for (const message of messages) {
    try {
      events.push({ message, event: parseMessage(ledgerEventSchema, message.subject, message.data) });
    } catch (error) {
      rejected.push(rejection(message, error));
    }
  }
  for (const r of rejected) log.error({ msgId: r.msgId, streamSeq: r.streamSeq, error: r.error }, 'rejected malformed ledger message');
  try {
    const result = await store.append(
      events.map((e) => e.event),
      rejected,
    );
    log.debug({ ...result, batch: messages.length }, 'ledger batch written');
  } catch (error) {
    if (!isDataError(error)) throw error;
    log.warn({ err: error }, 'database refused part of a ledger batch; writing it event by event');
    await store.append([], rejected);
    for (const { message, event } of events) {
      try {
        await store.append([event]);
      } catch (eventError) {
        if (!isDataError(eventError)) throw eventError;
        const r = rejection(message, eventError);
        log.error({ msgId: r.msgId, streamSeq: r.streamSeq, error: r.error }, 'rejected ledger event the database refused');
        await store.append([], [r]);
      }
    }
  }
}
