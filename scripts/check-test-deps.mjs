// Checks, before `npm test`, that what the tests talk to is running, and says
// how to get whatever is missing. Exit code 1 with a message; nothing else runs.
// Then builds the control plane of the operator tests (kube-apiserver and etcd,
// from their Go modules, into a cache outside the repository; a no-op once built)
// when Go is installed; without Go those tests are skipped, and this says so.
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import pg from 'pg';

const databaseUrl = process.env.PUNK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const natsUrl = new URL(process.env.PUNK_TEST_NATS_URL ?? 'nats://127.0.0.1:4222');
const problems = [];

const [major] = process.versions.node.split('.').map(Number);
if (major < 22) {
  problems.push(
    `Node.js ${process.versions.node} is too old: Punk needs Node 22 or later. Run the tests through npm (\`npm test\`), which uses the Node that \`npm ci\` installed in node_modules/.bin.`,
  );
}

try {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 3000 });
  await client.connect();
  await client.query('select 1');
  await client.end();
} catch (error) {
  const where = new URL(databaseUrl);
  problems.push(
    `PostgreSQL is not reachable at ${where.host}${where.pathname} (${error.message}).\n` +
      `  Debian: apt-get install postgresql && pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n` +
      `  (the tests connect as ${where.username || 'postgres'} with trust auth to database ${where.pathname.slice(1)}; set PUNK_TEST_DATABASE_URL to use another)\n` +
      `  Docker: docker compose -f compose.yaml up -d postgres`,
  );
}

try {
  const info = await new Promise((resolve, reject) => {
    const socket = net.connect(Number(natsUrl.port || 4222), natsUrl.hostname);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error('no INFO within 3 s'));
    }, 3000);
    socket.once('data', (data) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(String(data));
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  const json = JSON.parse(info.replace(/^INFO\s+/, ''));
  if (!json.jetstream) throw new Error('the server runs without JetStream (start it with -js)');
} catch (error) {
  problems.push(
    `NATS with JetStream is not reachable at ${natsUrl.host} (${error.message}).\n` +
      `  Debian: apt-get install nats-server && nats-server -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server &\n` +
      `  (set PUNK_TEST_NATS_URL to use another)\n` +
      `  Docker: docker compose -f compose.yaml up -d nats`,
  );
}

// The dashboard's browser tests drive Debian's Chromium through playwright-core, which never downloads a browser.
const chromium = process.env.PUNK_TEST_CHROMIUM ?? '/usr/bin/chromium';
if (spawnSync(chromium, ['--version'], { stdio: 'ignore' }).status !== 0) {
  problems.push(
    `Chromium is not installed at ${chromium} (the dashboard tests, e2e/src/dashboard, drive it headless).\n` +
      `  Debian: apt-get install -y chromium\n` +
      `  (set PUNK_TEST_CHROMIUM to use another Chromium executable)`,
  );
}

if (problems.length > 0) {
  process.stderr.write(`npm test cannot start: what the tests need is missing.\n\n${problems.map((p) => `- ${p}`).join('\n\n')}\n`);
  process.exit(1);
}

if (spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0) {
  const build = spawnSync(process.execPath, [new URL('./control-plane.mjs', import.meta.url).pathname, 'build'], { stdio: 'inherit' });
  if (build.status !== 0) {
    process.stderr.write(
      'npm test cannot start: building kube-apiserver and etcd for the operator tests failed (see above; docs/control-plane.md).\n',
    );
    process.exit(1);
  }
} else {
  process.stderr.write(
    'npm test: Go is not installed, so the operator tests, which need a kube-apiserver and etcd built from their Go modules, are skipped.\n' +
      '  Install Go 1.26 or later (https://go.dev/dl; the golang package of Debian 12 is too old), then npm test builds them (docs/control-plane.md).\n',
  );
}
