/**
 * Wake on first call: a call to a server scaled to zero by `spec.idle` is held here while the server is woken. The
 * replica asks for a wake on `punk.server.wake` (the operator scales the McpServer back to its remembered replicas;
 * `punk cluster` starts its process), then waits until the server is published running again (the operator does so
 * once its pods are ready), bounded by `spec.idle.wakeTimeout`. The calls of one server held on this replica share
 * one wake (other replicas' wakes of it are answered alike by the operator). Past the bound every held call is
 * answered `ServerWakeTimeout`, naming the McpServer's condition as the operator answers it then.
 */
import {
  deadlines,
  durationMs,
  errorMessage,
  parseMessage,
  PunkError,
  serverWakeReplySchema,
  subjects,
  type Bus,
  type Logger,
  type McpServer,
  type ServerWakeReply,
} from '@punk/lib';
import { observeWake } from '../metrics.js';
import type { Upstream } from '../upstream.js';

/** How often a held call is told of the wake's progress, and a wake not answered is asked again, in milliseconds. */
const WAKE_TICK_MS = 1_000;

/** Told the progress of a wake each {@link WAKE_TICK_MS}: seconds waited and the budget, and a sentence for people. */
export type WakeProgress = (elapsedS: number, totalS: number, message: string) => void;

interface Wake {
  server: McpServer;
  startedAt: number;
  totalMs: number;
  promise: Promise<Upstream>;
  settle(upstream: Upstream): void;
  fail(error: unknown): void;
  timer: NodeJS.Timeout;
}

/** What {@link ServerWaker} needs. */
export interface ServerWakerOptions {
  bus: Bus;
  log: Logger;
  /** The pooled upstream of server `<namespace>/<name>` when it is served running here, else undefined. */
  upstreamOf(key: string): Upstream | undefined;
}

/** The wakes of the servers this replica holds calls for (see the module comment). */
export class ServerWaker {
  private readonly wakes = new Map<string, Wake>();

  constructor(private readonly options: ServerWakerOptions) {}

  /**
   * Resolves with the upstream of `server` (asleep: scaled to zero with `spec.idle`) once it is woken and served
   * here, telling `progress` every second meanwhile.
   * @throws PunkError `ServerWakeTimeout` past `spec.idle.wakeTimeout`, naming the McpServer and its condition;
   *   `Cancelled` when `signal` aborts first (the wake goes on for the other callers).
   */
  async wake(server: McpServer, progress: WakeProgress | undefined, signal: AbortSignal | undefined): Promise<Upstream> {
    const key = `${server.metadata.namespace ?? 'default'}/${server.metadata.name}`;
    const wake = this.wakes.get(key) ?? this.begin(key, server);
    const tell = () => {
      const elapsedS = Math.floor((Date.now() - wake.startedAt) / 1000);
      const totalS = Math.ceil(wake.totalMs / 1000);
      progress?.(elapsedS, totalS, `starting server ${server.metadata.name}: ${String(elapsedS)} of ${String(totalS)} s`);
    };
    tell();
    const ticker = progress ? setInterval(tell, WAKE_TICK_MS) : undefined;
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () =>
        reject(
          new PunkError('Cancelled', `the client cancelled the call while server ${server.metadata.name} was woken`, {
            server: server.metadata.name,
          }),
        );
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([wake.promise, aborted]);
    } finally {
      clearInterval(ticker);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Settles the wakes of the servers served running again (call after each change of the served set). */
  served(): void {
    for (const [key, wake] of this.wakes) {
      const upstream = this.options.upstreamOf(key);
      if (upstream) wake.settle(upstream);
    }
  }

  /** Fails every wake (the gateway's stop). */
  stop(): void {
    for (const wake of this.wakes.values())
      wake.fail(new PunkError('ServerUnavailable', `the gateway stopped while server ${wake.server.metadata.name} was woken`));
  }

  private begin(key: string, server: McpServer): Wake {
    const { namespace = 'default', name } = server.metadata;
    const totalMs = durationMs(server.spec.idle!.wakeTimeout);
    let settle!: (upstream: Upstream) => void;
    let fail!: (error: unknown) => void;
    const promise = new Promise<Upstream>((resolve, reject) => {
      settle = resolve;
      fail = reject;
    });
    const startedAt = Date.now();
    let done = false;
    const end = (outcome: 'woken' | 'timeout' | 'failed') => {
      done = true;
      clearTimeout(wake.timer);
      this.wakes.delete(key);
      observeWake(key, outcome, (Date.now() - startedAt) / 1000);
    };
    const wake: Wake = {
      server,
      startedAt,
      totalMs,
      promise,
      settle: (upstream) => {
        if (done) return;
        end('woken');
        this.options.log.info({ server: key, waitedMs: Date.now() - startedAt }, `server ${key} is awake`);
        settle(upstream);
      },
      fail: (error) => {
        if (done) return;
        end('failed');
        fail(error);
      },
      timer: setTimeout(() => {
        void this.ask(namespace, name, 2_000)
          .catch(() => undefined)
          .then((reply) => {
            if (done) return;
            end('timeout');
            const condition = reply ? reply.condition : 'unknown: the operator did not answer punk.server.wake';
            fail(
              new PunkError(
                'ServerWakeTimeout',
                `server ${name} did not become ready within ${server.spec.idle!.wakeTimeout} (McpServer ${namespace}/${name} spec.idle.wakeTimeout); its condition: ${condition}`,
                { server: name },
              ),
            );
          });
      }, totalMs),
    };
    // Every caller may have given up (cancelled) before the wake fails: its failure is then nobody's to handle.
    wake.promise.catch(() => undefined);
    this.wakes.set(key, wake);
    // Asked until answered (no operator yet, a lost request), while the wake lasts.
    const request = async () => {
      while (!done) {
        let reply: ServerWakeReply | undefined;
        try {
          reply = await this.ask(namespace, name, Math.min(deadlines.serverWakeMs, totalMs));
        } catch (error) {
          reply = { replicas: 0, condition: '', message: errorMessage(error) };
        }
        if (done) return;
        if (reply && reply.replicas === 0 && reply.message) {
          end('failed');
          fail(new PunkError('ServerWakeFailed', `server ${name} cannot be woken: ${reply.message}`, { server: name }));
          return;
        }
        if (reply) return;
        await new Promise((resolve) => setTimeout(resolve, WAKE_TICK_MS));
      }
    };
    void request();
    // Served already (a publish that came before this call looked): settles at once.
    queueMicrotask(() => this.served());
    return wake;
  }

  /**
   * One request on `punk.server.wake`; undefined (logged) when nobody answers in `timeoutMs`.
   * @throws PunkError the answerer's refusal (e.g. `ServerNotFound`, an McpServer without spec.idle).
   */
  private async ask(namespace: string, name: string, timeoutMs: number): Promise<ServerWakeReply | undefined> {
    try {
      const reply = await this.options.bus.request(subjects.serverWake, { namespace, name }, { timeoutMs });
      return parseMessage(serverWakeReplySchema, subjects.serverWake, reply);
    } catch (error) {
      if (error instanceof PunkError && !['BusTimeout', 'BusNoResponders', 'BusUnavailable'].includes(error.code)) throw error;
      this.options.log.warn({ server: `${namespace}/${name}`, err: errorMessage(error) }, 'a wake request was not answered');
      return undefined;
    }
  }
}
