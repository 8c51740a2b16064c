/** Finding the server's command the way spawn() will (readiness of `punk-bridge serve`). */
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, join, resolve } from 'node:path';

/**
 * The executable file `command` names: itself when it contains a `/` (relative to the working directory),
 * else the first executable `<dir>/<command>` of `PATH` (as execvp looks it up).
 * @returns its path, or undefined when there is none.
 */
export async function findCommand(command: string, path: string | undefined): Promise<string | undefined> {
  const candidates = command.includes('/')
    ? [resolve(command)]
    : (path ?? '')
        .split(delimiter)
        .filter((dir) => dir !== '')
        .map((dir) => join(dir, command));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here: the next directory
    }
  }
  return undefined;
}
