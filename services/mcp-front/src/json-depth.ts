/**
 * The nesting limit of every JSON body the front parses (the MCP endpoints and the REST API): a deeper body
 * would exhaust the stack of whatever walks it next (schema checks, copies, `JSON.stringify` onto the bus).
 */
import type { NextFunction, Request, Response } from 'express';

/** Deepest JSON nesting a request may carry: deeper values would exhaust the stack of whatever walks them (schema checks, copies). */
export const MAX_JSON_DEPTH = 256;

/** Why `body` nests more than {@link MAX_JSON_DEPTH} arrays and objects, or undefined when it does not; walked without recursion. */
export function jsonDepthRefusal(body: unknown): string | undefined {
  const stack: Array<[unknown, number]> = [[body, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > MAX_JSON_DEPTH)
      return `the body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels (the limit): send a flatter body`;
    for (const child of Object.values(value)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return undefined;
}

/**
 * Express middleware, after a JSON body parser: a body nesting deeper than {@link MAX_JSON_DEPTH} goes to the
 * error handler as a 400 of type `entity.too.deep` (answered by `bodyRefusal`), never to the route.
 */
export function checkJsonDepth(req: Request, _res: Response, next: NextFunction): void {
  const refusal = jsonDepthRefusal(req.body);
  if (refusal === undefined) next();
  else next(Object.assign(new Error(refusal), { status: 400, type: 'entity.too.deep' }));
}
