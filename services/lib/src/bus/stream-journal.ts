/**
 * The journal of an in-process stream: every appended message is written to a file of the data directory before
 * its append resolves, and the file is emptied (or compacted) once the stream's consumers acknowledged what it
 * holds and it passed a size. So a message whose append resolved survives a crash of the process, and the next start
 * hands it to the consumers again; the ledger stores each event id once, so a message replayed after its commit is
 * not stored twice.
 *
 * Group write: the messages appended while the event loop runs one turn go out in one write, when that turn's I/O is
 * done (`setImmediate`), and their appends resolve together. Group sync: the file is fdatasync'ed at most
 * {@link SYNC_WINDOW_MS} after a write, off the event loop, without holding any append: an append that resolved
 * survives SIGKILL at once (the operating system holds it), and a power loss after that window (as PGlite's own files).
 */
import { closeSync, fdatasync, ftruncateSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import type { Logger } from '../log.js';
import type { BusHeaders } from './bus.js';

/** One journaled message: what an append stored (its `payload` is the message's JSON text). */
export interface JournalEntry {
  subject: string;
  msgId: string;
  payload: string;
  headers: BusHeaders;
}

/** Past this size the journal is rewritten with only the unacknowledged messages, even while some are pending. */
const COMPACT_BYTES = 8 * 1024 * 1024;

/**
 * Once every message is acknowledged, the journal is emptied only when it holds at least this many bytes: an
 * `ftruncate` per acknowledgement was 2% of a call's CPU, and the few acknowledged messages left are handed to the
 * consumers again after a crash or restart, which the ledger stores once (by event id).
 */
const TRUNCATE_BYTES = 64 * 1024;

/** Longest time a written message waits for the journal's fdatasync, in milliseconds. */
export const SYNC_WINDOW_MS = 100;

/** An open journal file (owner-only, 0600). */
export class StreamJournal {
  private bytes: number;
  /** Lines of the appends of this event-loop turn, and their one write. */
  private lines: string[] = [];
  private flush: Promise<void> | undefined;
  private syncTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly path: string,
    private fd: number,
    bytes: number,
  ) {
    this.bytes = bytes;
  }

  /**
   * Opens (creating) the journal at `path` and returns it with the messages it still holds, oldest first. A last
   * line cut short by a crash is skipped with a warning (its append never resolved).
   * @throws Error when the file cannot be opened or read.
   */
  static open(path: string, log?: Logger): { journal: StreamJournal; entries: JournalEntry[] } {
    const fd = openSync(path, 'a+', 0o600);
    const text = readFileSync(path, 'utf8');
    const entries: JournalEntry[] = [];
    for (const line of text.split('\n')) {
      if (line === '') continue;
      try {
        entries.push(JSON.parse(line) as JournalEntry);
      } catch {
        log?.warn({ journal: path }, 'skipped a journal line cut short by a crash (its append never resolved)');
      }
    }
    return { journal: new StreamJournal(path, fd, Buffer.byteLength(text)), entries };
  }

  /**
   * Writes one message with the others of this event-loop turn; resolves once the operating system holds them.
   * @throws (rejects) the write's error.
   */
  write(entry: JournalEntry): Promise<void> {
    this.lines.push(`${JSON.stringify(entry)}\n`);
    this.flush ??= new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        try {
          this.writeLines();
        } catch (error) {
          reject(error as Error);
          return;
        }
        resolve();
      });
    });
    return this.flush;
  }

  /** Writes the lines of this turn's appends in one write (none: nothing); {@link close} writes them too. */
  private writeLines(): void {
    this.flush = undefined;
    if (this.lines.length === 0) return;
    const text = Buffer.from(this.lines.join(''));
    this.lines = [];
    for (let written = 0; written < text.length;) written += writeSync(this.fd, text, written);
    this.bytes += text.length;
    this.syncSoon();
  }

  /** Schedules one fdatasync of what is written, within {@link SYNC_WINDOW_MS}. */
  private syncSoon(): void {
    if (this.syncTimer) return;
    this.syncTimer = setTimeout(() => {
      this.syncTimer = undefined;
      // Best effort off the loop: a file closed or replaced meanwhile was synced by its own close or rewrite.
      fdatasync(this.fd, () => undefined);
    }, SYNC_WINDOW_MS);
    this.syncTimer.unref();
  }

  /**
   * After the consumers acknowledged: empties the journal when nothing is unacknowledged and it holds 64 KiB or
   * more, or rewrites it with `unacknowledged()` once it grew past 8 MiB.
   */
  acknowledged(pending: number, unacknowledged: () => JournalEntry[]): void {
    if (pending === 0) {
      if (this.bytes >= TRUNCATE_BYTES) {
        ftruncateSync(this.fd, 0);
        this.bytes = 0;
      }
      return;
    }
    if (this.bytes < COMPACT_BYTES) return;
    const next = `${this.path}.next`;
    const fd = openSync(next, 'w', 0o600);
    let bytes = 0;
    for (const entry of unacknowledged()) bytes += writeSync(fd, `${JSON.stringify(entry)}\n`);
    renameSync(next, this.path);
    closeSync(this.fd);
    this.fd = fd;
    this.bytes = bytes;
  }

  /**
   * Closes the file; what it holds stays for the next start, unless `acknowledged` says the consumers acknowledged
   * everything (then it is emptied first, so a clean stop hands nothing to the consumers again).
   */
  close(acknowledged = false): void {
    // Appends of this turn not yet written (a state change recorded as Punk stops) go out before the file closes.
    this.writeLines();
    clearTimeout(this.syncTimer);
    if (acknowledged && this.bytes > 0) ftruncateSync(this.fd, 0);
    closeSync(this.fd);
  }
}
