/**
 * Who listens on a local TCP port, so the gateway connects only to a server process it started: before a local
 * HTTP server is spawned its port must be free (else the start fails naming the port and the process holding
 * it), and after its handshake the listener must belong to that server's process group and be bound to loopback.
 *
 * On Linux the listeners come from `/proc/net/tcp` and `/proc/net/tcp6` and their processes from the socket inodes
 * in `/proc/<pid>/fd` (other users' processes cannot be inspected: their pids stay unknown). Elsewhere the only
 * check is a TCP connect to 127.0.0.1 before the spawn.
 *
 * A local HTTP server without `spec.port` gets a free loopback port picked by {@link freePort} (`$(PORT)` expands to it).
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import ipaddr from 'ipaddr.js';
import { PunkError } from '@punk/lib';

/** One listening socket on the port. */
export interface PortListener {
  /** The address it is bound to (`0.0.0.0` and `::` are every interface). */
  address: string;
  /** Whether only this host can reach it (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104). */
  loopback: boolean;
  /** The processes holding the socket that could be inspected (none: another user's). */
  pids: number[];
}

/** TCP state LISTEN in /proc/net/tcp. */
const LISTEN = '0A';

/** Asks the kernel for a free TCP port on 127.0.0.1 (it may be taken again before use; callers bind at once). */
export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => {
        resolvePort(port);
      });
    });
  });
}

/** The sockets listening on `port` (Linux), with the processes holding them; undefined where /proc/net/tcp cannot be read. */
export async function portListeners(port: number): Promise<PortListener[] | undefined> {
  const sockets: { address: ipaddr.IPv4 | ipaddr.IPv6; inode: string }[] = [];
  let readable = false;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(table, 'utf8').catch(() => undefined);
    if (text === undefined) continue;
    readable = true;
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      const [hexAddress, hexPort] = (fields[1] ?? '').split(':');
      if (fields[3] !== LISTEN || hexAddress === undefined || Number.parseInt(hexPort ?? '', 16) !== port) continue;
      sockets.push({ address: addressOf(hexAddress), inode: fields[9] ?? '' });
    }
  }
  if (!readable) return undefined;
  if (sockets.length === 0) return [];
  const holders = await socketHolders(new Set(sockets.map((s) => s.inode)));
  return sockets.map(({ address, inode }) => {
    const plain = address instanceof ipaddr.IPv6 && address.isIPv4MappedAddress() ? address.toIPv4Address() : address;
    return { address: plain.toString(), loopback: plain.range() === 'loopback', pids: holders.get(inode) ?? [] };
  });
}

/**
 * Checks that nothing listens on `port` before server `server` is spawned to listen there.
 * @throws PunkError `ServerPortInUse` naming the port and the process holding it.
 */
export async function ensurePortFree(server: string, port: number): Promise<void> {
  const listeners = await portListeners(port);
  const taken = listeners === undefined ? await acceptsConnections(port) : listeners.length > 0;
  if (!taken) return;
  const holder = listeners === undefined ? 'another process' : await describeHolders(listeners);
  throw new PunkError(
    'ServerPortInUse',
    `server ${server}: port ${String(port)} is already in use by ${holder}; Punk connects only to a server process it started. ` +
      'Stop that process, or give the server a free port (spec.port and the setting the server reads it from), or leave spec.port out: Punk picks a free one, which $(PORT) in spec.args or spec.env expands to',
    { port, pids: listeners?.flatMap((l) => l.pids) ?? [] },
  );
}

/**
 * Checks, after its handshake, that what answered on `port` is server `server`'s own process `pid` (or its group;
 * none when the spawn failed)
 * and listens on loopback only: a listener of another process reachable on 127.0.0.1 fails, and so does one of
 * the server bound beyond loopback, which anyone on the network could call directly, bypassing authentication,
 * governance and the ledger. Where /proc cannot be read this checks nothing (the port was checked before the spawn).
 * @throws PunkError `ServerPortInUse` (another process answers), `ServerListensBeyondLoopback`.
 */
export async function verifyOwnListener(server: string, port: number, pid: number | undefined): Promise<void> {
  const listeners = await portListeners(port);
  if (listeners === undefined) return;
  const owned = await Promise.all(
    listeners.map(async (l) => pid !== undefined && (await Promise.all(l.pids.map((p) => belongsTo(p, pid)))).some(Boolean)),
  );
  const foreign = listeners.filter((l, i) => !owned[i] && (l.loopback || l.address === '0.0.0.0' || l.address === '::'));
  if (foreign.length > 0 || !owned.some(Boolean)) {
    const holders = foreign.length > 0 ? await describeHolders(foreign) : 'no process of its own';
    throw new PunkError(
      'ServerPortInUse',
      `server ${server}: port ${String(port)} is answered by ${holders}, not by the process Punk started (pid ${String(pid ?? 'none')}); Punk connects only to its own. ` +
        'Stop that process, or give the server a free port (spec.port and the setting the server reads it from), or leave spec.port out: Punk picks a free one, which $(PORT) in spec.args or spec.env expands to',
      { port },
    );
  }
  const wide = listeners.filter((l, i) => owned[i] && !l.loopback);
  if (wide.length > 0)
    throw new PunkError(
      'ServerListensBeyondLoopback',
      `server ${server} listens on ${wide.map((l) => (l.address.includes(':') ? `[${l.address}]` : l.address)).join(', ')} port ${String(port)}, beyond loopback: ` +
        'anyone who can reach this host could call it directly, bypassing authentication, governance and the ledger. ' +
        'Make it listen on 127.0.0.1 (its host setting, in spec.args or spec.env)',
      { port, addresses: wide.map((l) => l.address) },
    );
}

/** Whether something accepts TCP connections on 127.0.0.1:`port` (the check where /proc is not there). */
export function acceptsConnections(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.setTimeout(1_000);
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.once('connect', () => {
      done(true);
    });
    socket.once('error', () => {
      done(false);
    });
    socket.once('timeout', () => {
      done(false);
    });
  });
}

/** Whether process `pid` is `root` or in its process group, or descends from it (a child that left the group). */
export async function belongsTo(pid: number, root: number): Promise<boolean> {
  for (let current = pid, depth = 0; current > 1 && depth < 64; depth++) {
    if (current === root) return true;
    const stat = await processStat(current);
    if (!stat) return false;
    if (stat.pgrp === root) return true;
    current = stat.ppid;
  }
  return false;
}

/** `pid 123 (node server.js --port 4101)` for each holder of `listeners`, or what is known when none could be inspected. */
export async function describeHolders(listeners: PortListener[]): Promise<string> {
  const pids = [...new Set(listeners.flatMap((l) => l.pids))];
  if (pids.length === 0) return "a process Punk cannot inspect (another user's, or outside this host's /proc)";
  const described = await Promise.all(
    pids.map(async (pid) => {
      const cmdline = await readFile(`/proc/${String(pid)}/cmdline`, 'utf8').catch(() => '');
      // Long paths shortened to their last two parts, so the arguments that tell servers apart stay in view.
      const parts = cmdline.split('\0').filter(Boolean);
      const command = parts
        .map((part) => (part.length > 40 && part.includes('/') ? `.../${part.split('/').slice(-2).join('/')}` : part))
        .join(' ');
      return command ? `pid ${String(pid)} (${command.length > 200 ? `${command.slice(0, 197)}...` : command})` : `pid ${String(pid)}`;
    }),
  );
  return described.join(', ');
}

/** The address of a /proc/net/tcp{,6} `local_address`: 32-bit words in host (little-endian) byte order. */
function addressOf(hex: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const bytes: number[] = [];
  for (let word = 0; word < hex.length; word += 8) {
    for (let byte = 6; byte >= 0; byte -= 2) bytes.push(Number.parseInt(hex.slice(word + byte, word + byte + 2), 16));
  }
  return ipaddr.fromByteArray(bytes);
}

/** The processes holding each socket inode, from the `socket:[inode]` links in /proc/<pid>/fd. */
async function socketHolders(inodes: Set<string>): Promise<Map<string, number[]>> {
  const holders = new Map<string, number[]>();
  const pids = (await readdir('/proc').catch(() => [])).filter((entry) => /^\d+$/.test(entry));
  await Promise.all(
    pids.map(async (pid) => {
      const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
      for (const fd of fds) {
        const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode === undefined || !inodes.has(inode)) continue;
        const list = holders.get(inode) ?? [];
        if (!list.includes(Number(pid))) list.push(Number(pid));
        holders.set(inode, list);
      }
    }),
  );
  return holders;
}

/** The parent and process group of `pid` from /proc/<pid>/stat; undefined when it is gone. */
async function processStat(pid: number): Promise<{ ppid: number; pgrp: number } | undefined> {
  const text = await readFile(`/proc/${String(pid)}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses, so read after the last ')'.
  const [, ppid, pgrp] = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(ppid), pgrp: Number(pgrp) };
}
