// A raw MCP client over Streamable HTTP for the benchmarks, so the client itself costs little: node:http with
// one keep-alive socket per session, JSON-RPC bodies written by hand, answers read as JSON or as an SSE stream.
// Both protocol eras: a 2025-11-25 session (initialize, notifications/initialized, then `Mcp-Session-Id` on
// every request, DELETE at close) or 2026-07-28 stateless requests (protocol version, client info and
// capabilities in `_meta`, `Mcp-Method` / `Mcp-Name` headers).
import { Agent, request } from 'node:http';

/** The protocol eras the benchmarks speak. */
export const ERAS = ['2025-11-25', '2026-07-28'];

const clientInfo = { name: 'punk-bench', version: '1' };

/** An MCP error answer, or an HTTP status without one. */
export class CallError extends Error {}

/**
 * One POST (or DELETE) of `body` to `url` on `agent`; resolves with `{ status, headers, text }`.
 * `signal` aborts it (the request then rejects with an AbortError).
 */
function send(url, agent, method, headers, body, signal, retried = false) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers, signal }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (error) => {
      // A keep-alive socket that the server closed while it idled between two slices: the request never reached
      // the server, so it goes once more on a new socket (Node's documented use of `reusedSocket`).
      if (req.reusedSocket && error.code === 'ECONNRESET' && !retried) resolve(send(url, agent, method, headers, body, signal, true));
      else reject(error);
    });
    req.end(body);
  });
}

/** The JSON-RPC answer with `id` in a response body: plain JSON, or one `data:` line of an SSE stream. */
function answerOf(response, id) {
  const type = response.headers['content-type'] ?? '';
  const messages = type.startsWith('text/event-stream')
    ? response.text
        .split('\n')
        .filter((line) => line.startsWith('data:') && line.length > 6)
        .map((line) => JSON.parse(line.slice(5)))
    : response.text
      ? [JSON.parse(response.text)]
      : [];
  const answer = messages.find((m) => m.id === id);
  if (!answer) throw new CallError(`HTTP ${response.status} without an answer to request ${id}: ${response.text.slice(0, 300)}`);
  if (answer.error) throw new CallError(`error ${answer.error.code}: ${answer.error.message}`);
  return answer.result;
}

/**
 * A client session on `url` (an MCP endpoint) in `era`: `open()` first, then `call(tool, args)` any number of
 * times (sequentially: one socket), `close()` at the end.
 */
export class Session {
  constructor(url, era) {
    this.url = url;
    this.era = era;
    this.agent = new Agent({ keepAlive: true, maxSockets: 1 });
    this.nextId = 1;
    this.sessionId = undefined;
  }

  headers(extra) {
    return {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(this.sessionId && { 'mcp-session-id': this.sessionId }),
      ...extra,
    };
  }

  /** 2025-11-25: the initialize handshake (the session id, when the server gives one, goes on every request); 2026-07-28: nothing. */
  async open() {
    if (this.era !== '2025-11-25') return this;
    const id = this.nextId++;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'initialize',
      params: { protocolVersion: this.era, capabilities: {}, clientInfo },
    });
    const response = await send(this.url, this.agent, 'POST', this.headers(), body);
    answerOf(response, id);
    this.sessionId = response.headers['mcp-session-id'];
    const initialized = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const ack = await send(this.url, this.agent, 'POST', this.headers({ 'mcp-protocol-version': this.era }), initialized);
    if (ack.status >= 300) throw new CallError(`notifications/initialized answered HTTP ${ack.status}: ${ack.text.slice(0, 300)}`);
    return this;
  }

  /**
   * One `tools/call` of `name` with `args`; resolves with its result.
   * @throws CallError when the server answers an error (or an HTTP status without an answer); an AbortError when `signal` fires.
   */
  async call(name, args, signal) {
    const id = this.nextId++;
    const params =
      this.era === '2025-11-25'
        ? { name, arguments: args }
        : {
            name,
            arguments: args,
            _meta: {
              'io.modelcontextprotocol/protocolVersion': this.era,
              'io.modelcontextprotocol/clientInfo': clientInfo,
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          };
    const headers = this.headers({
      'mcp-protocol-version': this.era,
      ...(this.era !== '2025-11-25' && { 'mcp-method': 'tools/call', 'mcp-name': name }),
    });
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params });
    return answerOf(await send(this.url, this.agent, 'POST', headers, body, signal), id);
  }

  /** Ends a 2025-era session (DELETE; a server without sessions may refuse it) and closes the socket. */
  async close() {
    if (this.sessionId)
      await send(this.url, this.agent, 'DELETE', this.headers({ 'mcp-protocol-version': this.era }), undefined).catch(() => undefined);
    this.agent.destroy();
  }
}
