// Where the project's scripts find Go: the `go` on PATH, else the official install at /usr/local/go/bin/go.
import { spawnSync } from 'node:child_process';

/**
 * The `go` command that answers `go version`, with what it printed.
 * @returns {{ command: string, version: string } | undefined} undefined when Go is not installed
 */
export function findGo() {
  for (const command of ['go', '/usr/local/go/bin/go']) {
    const result = spawnSync(command, ['version'], { encoding: 'utf8' });
    if (result.status === 0) return { command, version: result.stdout.trim() };
  }
  return undefined;
}
