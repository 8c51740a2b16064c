import {
  consumers,
  errorMessage,
  ledgerEventSchema,
  receivedMessage,
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
 * is validated against `ledgerEventSchema` (but events this process appended itself: `receivedMessage`) and written in one transaction:
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

/**
 * Writes one delivered batch; resolves when it is stored (then the bus acknowledges it). Events this process appended
 * itself are taken as their type says (validation once: their sender built them); should the batch fail, they are
 * validated then, so one that breaks the contract is rejected like a malformed message off the network instead of
 * holding the stream up.
 */
export async function writeBatch(store: LedgerStore, log: Logger, messages: StreamMessage[]): Promise<void> {
  try {
    await writeValidated(store, log, messages, true);
  } catch (error) {
    if (!messages.some((message) => message.local)) throw error;
    log.warn({ err: errorMessage(error) }, 'a ledger batch failed; validating its events before writing it again');
    await writeValidated(store, log, messages, false);
  }
}

/** Writes a batch, validating the events of it that came off the network (all of them when `trustLocal` is false). */
async function writeValidated(store: LedgerStore, log: Logger, messages: StreamMessage[], trustLocal: boolean): Promise<void> {
  const events: Array<{ message: StreamMessage; event: LedgerEvent }> = [];
  const rejected: RejectedMessage[] = [];
  for (const message of messages) {
    try {
      events.push({ message, event: receivedMessage(ledgerEventSchema, message.subject, message.data, trustLocal && message.local) });
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
