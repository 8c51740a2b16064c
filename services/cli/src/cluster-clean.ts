/**
 * `punk cluster --clean` (`npm run cluster:clean`): removes what `punk cluster` leaves behind in the local
 * NATS and Postgres once it is stopped: the JetStream streams ({@link streams}), the KV buckets
 * ({@link buckets}, each stored as stream `KV_<bucket>`) and the cluster database.
 */
import { jetstreamManager, JetStreamApiError } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import {
  buckets,
  describeDatabaseUrl,
  errorMessage,
  openDatabase,
  parseNatsUrl,
  PunkError,
  redactNatsUrl,
  streams,
  type Logger,
} from '@punk/lib';

/** What {@link cleanCluster} removed; names it did not find are left out. */
export interface CleanedCluster {
  /** Streams deleted, KV buckets as `KV_<bucket>`. */
  streams: string[];
  /** The database dropped, or undefined when it did not exist. */
  database?: string;
}

/**
 * Deletes Punk's streams and KV buckets on the NATS at `natsUrl` and drops the database `databaseUrl` names
 * (connecting to database `postgres` of the same server). Run it with the cluster stopped: a database still
 * in use is not dropped, and then nothing is deleted on NATS either.
 * @throws PunkError `BusUnavailable` / `DatabaseUnavailable` naming what is unreachable, or
 *   `ClusterCleanFailed` naming the stream or database that could not be removed.
 */
export async function cleanCluster(natsUrl: string, databaseUrl: string, log: Logger): Promise<CleanedCluster> {
  const cleaned: CleanedCluster = { streams: [] };
  // The database first: a running cluster's ledgers hold it open, so its refusal stops the clean-up before
  // the NATS state a running cluster needs is gone.
  const name = decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const db = await openDatabase({ url: admin.toString(), log }).catch((error: unknown) => {
    throw new PunkError('DatabaseUnavailable', `Postgres at ${describeDatabaseUrl(databaseUrl)} is unreachable (${errorMessage(error)})`);
  });
  try {
    const found = await db.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount !== 0) {
      await db.query(`DROP DATABASE "${name.replace(/"/g, '""')}"`).catch((error: unknown) => {
        throw new PunkError('ClusterCleanFailed', `cannot drop database ${name} (is the cluster still running?): ${errorMessage(error)}`);
      });
      cleaned.database = name;
      log.info({ database: name }, 'dropped');
    }
  } finally {
    await db.close();
  }

  const { servers, credentials } = parseNatsUrl(natsUrl);
  const nc = await connect({ servers, ...credentials, name: 'punk-cluster-clean', timeout: 5000 }).catch((error: unknown) => {
    throw new PunkError('BusUnavailable', `cannot connect to NATS at ${redactNatsUrl(natsUrl)}: ${errorMessage(error)}`);
  });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5000 });
    const names = [
      ...Object.values(streams).map((stream) => stream.name),
      ...Object.values(buckets).map((bucket) => `KV_${(typeof bucket === 'function' ? bucket(0) : bucket).name}`),
    ];
    for (const name of names) {
      try {
        await jsm.streams.delete(name);
        cleaned.streams.push(name);
        log.info({ stream: name }, 'deleted');
      } catch (error) {
        if (error instanceof JetStreamApiError && /not found/i.test(error.message)) continue;
        throw new PunkError(
          'ClusterCleanFailed',
          `cannot delete stream ${name} on NATS at ${redactNatsUrl(natsUrl)}: ${errorMessage(error)}`,
        );
      }
    }
  } finally {
    await nc.close();
  }

  return cleaned;
}
