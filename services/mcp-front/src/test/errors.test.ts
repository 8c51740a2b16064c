import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ProtocolError } from '@modelcontextprotocol/server';
import { PunkError } from '@punk/lib';
import { toProtocolError } from '../errors.js';

describe('gateway errors as JSON-RPC errors', () => {
  const context = {
    method: 'tools/call',
    server: 'everything',
    target: 'everything__echo',
    deadline: { ms: 250, source: "the server's spec.timeout" },
  };

  it('an upstream error keeps its MCP code and data', () => {
    const mapped = toProtocolError(
      new PunkError('UpstreamError', 'server default/everything answered with an error: boom', {
        mcpCode: -32042,
        data: { elicitations: [] },
      }),
      context,
    );
    assert.equal(mapped.code, -32042);
    assert.deepEqual(mapped.data, { elicitations: [] });
    assert.match(mapped.message, /boom/);
  });

  it('a bus timeout is -32001 naming the server, the call, the deadline and where it comes from', () => {
    const mapped = toProtocolError(new PunkError('BusTimeout', 'request on punk.gateway.call got no reply within 250 ms'), context);
    assert.equal(mapped.code, -32001);
    assert.equal(
      mapped.message,
      `server "everything" did not answer tools/call everything__echo within 250 ms (the server's spec.timeout)`,
    );
  });

  it('governance not answering is named as such, with the subject, and the request said not to have run', () => {
    const timeout = toProtocolError(
      new PunkError('GovernanceTimeout', 'governance did not answer within 5000 ms on subject punk.governance.check'),
      context,
    );
    assert.equal(timeout.code, -32001);
    assert.equal(
      timeout.message,
      'tools/call everything__echo on server "everything" was not run: governance did not answer within 5000 ms on subject punk.governance.check',
    );
    const gone = toProtocolError(
      new PunkError('GovernanceUnavailable', 'governance did not answer on subject punk.governance.check'),
      context,
    );
    assert.equal(gone.code, -32603);
    assert.doesNotMatch(gone.message, /gateway/);
  });

  it('not-found and invalid codes are -32602; denials and the rest are -32603 with the PunkError code in data', () => {
    assert.equal(toProtocolError(new PunkError('ToolNotFound', 'no tool echo2'), context).code, -32602);
    assert.equal(toProtocolError(new PunkError('InvalidMessage', 'bad'), context).code, -32602);
    const denied = toProtocolError(new PunkError('PolicyDenied', 'policy deny-all denies write:everything/echo'), context);
    assert.equal(denied.code, -32603);
    assert.equal(denied.message, 'policy deny-all denies write:everything/echo');
    assert.deepEqual(denied.data, { code: 'PolicyDenied', server: 'everything' });
    assert.match(toProtocolError(new PunkError('BusNoResponders', 'x'), context).message, /no gateway is running/);
  });

  it('protocol errors pass through and anything else is an internal error', () => {
    const original = new ProtocolError(-32602, 'Unknown tool: x');
    assert.equal(toProtocolError(original, context), original);
    assert.equal(toProtocolError(new TypeError('oops'), context).code, -32603);
  });
});
