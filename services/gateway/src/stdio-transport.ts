/**
 * MCP over the stdin/stdout of a {@link ServerProcess}: newline-delimited
 * JSON-RPC, as the SDK's StdioClientTransport speaks it. The gateway owns the
 * process itself (to scrub its environment fully and to learn its exit code),
 * so this transport only frames messages.
 *
 * A line is bounded (`maxMessageBytes`): a longer one is dropped as it streams in, never held, and when its
 * JSON-RPC id can be read from its first or last bytes the request it answers gets a JSON-RPC error naming the
 * bound at once, marked with {@link DROPPED_BYTES_KEY} in its data (else the error is reported and the request
 * waits for its deadline).
 *
 * It is also the wire of the connection's exchange (upstream-exchange.ts): a line answering one of the exchange's
 * requests goes to it, parsed once and not validated further; every other line is checked against the JSON-RPC
 * message schema and goes to the SDK client.
 */
import { parseJSONRPCMessage, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '@punk/lib';
import type { ServerProcess } from './process.js';
import { isExchangeId, type ExchangeWire, type RawAnswer } from './upstream-exchange.js';

const NEWLINE = 0x0a;
/** How much of the start and the end of a dropped line is kept to find its id, in bytes. */
const EDGE_BYTES = 256;
/** JSON-RPC internal error. */
const INTERNAL_ERROR = -32603;

/**
 * The key, in the data of the JSON-RPC error this transport answers a request with when it dropped the line
 * answering it, of the line's size in bytes (beside `limit`, the bound): Punk's own, no server sends it.
 */
export const DROPPED_BYTES_KEY = 'punk.dev/droppedBytes';

/** The size and bound (bytes) of the answer this transport dropped, from the data of its JSON-RPC error; undefined for any other error. */
export function droppedAnswerOf(data: unknown): { bytes: number; limit: number } | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const { [DROPPED_BYTES_KEY]: bytes, limit } = data as Record<string, unknown>;
  return typeof bytes === 'number' && typeof limit === 'number' ? { bytes, limit } : undefined;
}

/** A client transport over an already spawned server process. */
export class ProcessStdioTransport implements Transport, ExchangeWire {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** The pieces of the line being read (never concatenated per chunk: a large line would be copied again and again). */
  private pieces: Buffer[] = [];
  private held = 0;
  /** The start and the end so far of a line past the bound, while it is being dropped. */
  private dropping: { head: string; tail: string; bytes: number } | undefined;
  private closed = false;
  /** Answers awaited by the exchange, by request id. */
  private readonly answers = new Map<string, (answer: RawAnswer, text: string | undefined) => void>();

  /** @param maxMessageBytes longest line read, in bytes (default twice `PUNK_MAX_RESULT_BYTES`'s default: 64 MiB). */
  constructor(
    private readonly process: ServerProcess,
    private readonly maxMessageBytes = 2 * DEFAULT_MAX_PAYLOAD_BYTES,
  ) {}

  async start(): Promise<void> {
    this.process.stdout?.on('data', (chunk: Buffer) => {
      let start = 0;
      for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
        this.hold(chunk.subarray(start, end));
        this.endLine();
        start = end + 1;
      }
      if (start < chunk.length) this.hold(chunk.subarray(start));
    });
    this.process.stdin?.on('error', (error) => this.onerror?.(error));
    void this.process.exited.then(() => this.finish());
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.process.stdin;
    if (this.closed || !stdin || stdin.destroyed) throw new Error('the server process is not running');
    const line = JSON.stringify(message) + '\n';
    if (!stdin.write(line)) await new Promise<void>((resolve) => stdin.once('drain', resolve));
  }

  expect(id: string, onAnswer: (answer: RawAnswer, text: string | undefined) => void): () => void {
    this.answers.set(id, onAnswer);
    return () => this.answers.delete(id);
  }

  /** Detaches from the process; stopping it is the owner's job. */
  async close(): Promise<void> {
    this.finish();
  }

  private hold(piece: Buffer): void {
    if (this.dropping) {
      this.dropping.bytes += piece.length;
      this.dropping.tail = (this.dropping.tail + piece.subarray(-EDGE_BYTES).toString('latin1')).slice(-EDGE_BYTES);
      return;
    }
    if (this.held + piece.length <= this.maxMessageBytes) {
      this.pieces.push(piece);
      this.held += piece.length;
      return;
    }
    const head = Buffer.concat([...this.pieces, piece])
      .subarray(0, EDGE_BYTES)
      .toString('latin1');
    this.dropping = { head, tail: piece.subarray(-EDGE_BYTES).toString('latin1'), bytes: this.held + piece.length };
    this.pieces = [];
    this.held = 0;
  }

  private endLine(): void {
    const dropped = this.dropping;
    if (dropped) {
      this.dropping = undefined;
      this.refuse(dropped);
      return;
    }
    const line = Buffer.concat(this.pieces, this.held).toString('utf8');
    this.pieces = [];
    this.held = 0;
    if (line.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      const value: unknown = JSON.parse(line);
      if (this.answered(value, line)) return;
      message = parseJSONRPCMessage(value);
    } catch (error) {
      this.onerror?.(error as Error);
      return;
    }
    this.onmessage?.(message);
  }

  /** Hands an answer to an exchanged request to its waiter; false for any other message. */
  private answered(value: unknown, text: string | undefined): boolean {
    if (typeof value !== 'object' || value === null || 'method' in value) return false;
    const id = (value as { id?: unknown }).id;
    if (!isExchangeId(id)) return false;
    const waiter = this.answers.get(id);
    if (!waiter) return false;
    this.answers.delete(id);
    waiter(value as RawAnswer, text);
    return true;
  }

  /** Answers the request a dropped line answered, when its id shows at either end (SDKs write it first or last). */
  private refuse(dropped: { head: string; tail: string; bytes: number }): void {
    const text = `the server sent a message of ${dropped.bytes} bytes, past the ${this.maxMessageBytes} bytes Punk reads from a stdio server (twice PUNK_MAX_RESULT_BYTES); Punk dropped it`;
    const id =
      /^\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d+|"(?:[^"\\]|\\.)*")/.exec(dropped.head)?.[1] ??
      /"id"\s*:\s*(\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(dropped.tail)?.[1];
    this.onerror?.(new Error(text));
    if (id === undefined) return;
    const answer = {
      jsonrpc: '2.0' as const,
      id: JSON.parse(id) as string | number,
      error: { code: INTERNAL_ERROR, message: text, data: { [DROPPED_BYTES_KEY]: dropped.bytes, limit: this.maxMessageBytes } },
    };
    if (!this.answered(answer, undefined)) this.onmessage?.(answer);
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.pieces = [];
    this.held = 0;
    this.dropping = undefined;
    // Their requests end with the process (the relay watches its exit); nothing is answered any more.
    this.answers.clear();
    this.onclose?.();
  }
}
