/**
 * Errors that cross a boundary (HTTP, bus, MCP) carry a machine-readable `code`
 * and a sentence for people that names the field or value that was wrong.
 */
export class PunkError extends Error {
  /** Machine-readable code, CamelCase (for example `InvalidConfig`, `BusTimeout`). */
  readonly code: string;
  /** Optional structured details (field paths, limits); never secret values. */
  readonly details: Record<string, unknown> | undefined;

  constructor(code: string, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PunkError';
    this.code = code;
    this.details = details;
  }
}

/** Returns a short message for any thrown value, without stack traces. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
