// Lists the tools of an MCP endpoint over Streamable HTTP and prints their names, one a line: the `helm test`
// of the chart, and a quick check by hand. Node 24 built-ins only (fetch), so it runs in the mcp-front image.
//
//   node list-tools.mjs <endpoint URL>        e.g. http://punk-mcp-front.punk-system.svc/mcp
//   MCP_BEARER_TOKEN=pk_… node list-tools.mjs <url>   with PUNK_AUTH_MODE=on (an API key or OAuth access token)
//
// What it does (MCP 2025-11-25, basic/lifecycle and basic/transports "Streamable HTTP"): POST `initialize`,
// keep the `Mcp-Session-Id` the server answers with, POST `notifications/initialized`, POST `tools/list` (following
// `nextCursor`), DELETE the session. Every POST accepts `application/json` and `text/event-stream`; an SSE answer is
// read until the JSON-RPC response of the request's id. Exit 0 after printing; exit 1 with one message on stderr
// naming the step that failed; exit 2 on bad usage.

const PROTOCOL_VERSION = '2025-11-25';
const TIMEOUT_MS = Number(process.env.MCP_TIMEOUT_MS ?? 30_000);

/** A failure of one step, reported as one line. */
class StepError extends Error {}

/**
 * The JSON-RPC message of `id` in an SSE body (text/event-stream): `data:` lines of one event joined by newlines;
 * events of other ids (notifications, requests) and empty priming events are skipped.
 * @param {ReadableStream<Uint8Array>} body
 * @param {number} id
 * @returns {Promise<unknown>} the message, or undefined when the stream ended without it
 */
async function responseFromEventStream(body, id) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return undefined;
      buffer += value.replace(/\r\n?/g, '\n');
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data === '') continue;
        const message = JSON.parse(data);
        if (message.id === id) return message;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * One MCP client session on a Streamable HTTP endpoint.
 * @param {string} url the endpoint
 * @param {string | undefined} token bearer token
 */
function session(url, token) {
  let sessionId;
  let nextId = 1;
  const headers = (extra) => ({
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    ...(token && { authorization: `Bearer ${token}` }),
    ...(sessionId && { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION }),
    ...extra,
  });
  const send = async (step, method, body) => {
    let response;
    try {
      response = await fetch(url, {
        method,
        headers: headers(),
        body: body && JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (error) {
      throw new StepError(`${step}: cannot reach ${url}: ${error.cause?.message ?? error.message}`);
    }
    if (!response.ok) {
      const text = (await response.text()).slice(0, 300);
      const hint = response.status === 401 ? ' (authentication is on: set MCP_BEARER_TOKEN to an API key)' : '';
      throw new StepError(`${step}: HTTP ${response.status}${hint}${text ? `: ${text}` : ''}`);
    }
    return response;
  };
  return {
    /**
     * Sends a request and returns its result.
     * @throws StepError on an HTTP failure, a JSON-RPC error, or no response of the request's id
     */
    async request(method, params) {
      const id = nextId++;
      const response = await send(method, 'POST', { jsonrpc: '2.0', id, method, params });
      sessionId ??= response.headers.get('mcp-session-id') ?? undefined;
      const type = response.headers.get('content-type') ?? '';
      const message = type.startsWith('text/event-stream') ? await responseFromEventStream(response.body, id) : await response.json();
      if (message === undefined) throw new StepError(`${method}: the event stream ended without the response`);
      if (message.error) throw new StepError(`${method}: JSON-RPC error ${message.error.code}: ${message.error.message}`);
      if (message.result === undefined)
        throw new StepError(`${method}: the answer is not a JSON-RPC response: ${JSON.stringify(message).slice(0, 300)}`);
      return message.result;
    },
    /** Sends a notification (the server answers 202). */
    async notify(method) {
      await send(method, 'POST', { jsonrpc: '2.0', method });
    },
    /** Ends the session (DELETE); a server that does not allow it answers 405, which is fine. */
    async close() {
      if (sessionId) await fetch(url, { method: 'DELETE', headers: headers(), signal: AbortSignal.timeout(TIMEOUT_MS) }).catch(() => {});
    },
  };
}

const url = process.argv[2];
if (!url || !/^https?:\/\//.test(url)) {
  process.stderr.write('usage: node list-tools.mjs <http(s) URL of an MCP endpoint>   (MCP_BEARER_TOKEN: bearer token)\n');
  process.exit(2);
}
const client = session(url, process.env.MCP_BEARER_TOKEN || undefined);
try {
  const init = await client.request('initialize', {
    protocolVersion: PROTOCOL_VERSION,
    capabilities: {},
    clientInfo: { name: 'punk-list-tools', version: '0.1.0' },
  });
  await client.notify('notifications/initialized');
  const names = [];
  let cursor;
  do {
    const page = await client.request('tools/list', cursor === undefined ? {} : { cursor });
    if (!Array.isArray(page.tools)) throw new StepError(`tools/list: the result has no tools array: ${JSON.stringify(page).slice(0, 300)}`);
    names.push(...page.tools.map((tool) => tool.name));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  await client.close();
  process.stderr.write(
    `${init.serverInfo?.name ?? 'server'} ${init.serverInfo?.version ?? ''} (protocol ${init.protocolVersion}) at ${url}: ${names.length} tools\n`,
  );
  process.stdout.write(names.map((name) => `${name}\n`).join(''));
} catch (error) {
  await client.close();
  process.stderr.write(`list-tools: ${error instanceof StepError ? error.message : error.stack}\n`);
  process.exit(1);
}
