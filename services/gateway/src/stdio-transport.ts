/**
 * MCP over the stdin/stdout of a {@link ServerProcess}: newline-delimited
 * JSON-RPC, as the SDK's StdioClientTransport speaks it. The gateway owns the
 * process itself (to scrub its environment fully and to learn its exit code),
 * so this transport only frames messages.
 */
import { ReadBuffer, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/client';
import type { ServerProcess } from './process.js';

/** A client transport over an already spawned server process. */
export class ProcessStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private readonly buffer = new ReadBuffer();
  private closed = false;

  constructor(private readonly process: ServerProcess) {}

  async start(): Promise<void> {
    const stdout = this.process.stdout;
    stdout?.on('data', (chunk: Buffer) => {
      this.buffer.append(chunk);
      for (;;) {
        let message: JSONRPCMessage | null;
        try {
          message = this.buffer.readMessage();
        } catch (error) {
          this.onerror?.(error as Error);
          continue;
        }
        if (message === null) break;
        this.onmessage?.(message);
      }
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

  /** Detaches from the process; stopping it is the owner's job. */
  async close(): Promise<void> {
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.buffer.clear();
    this.onclose?.();
  }
}
