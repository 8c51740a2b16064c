/**
 * What the dashboard's browser tests share: `punk up` with authentication on, a data directory and an admin key
 * ({@link startDashboardPunk}); Debian's Chromium driven by playwright-core, headless, in a fresh profile
 * ({@link openBrowser}); signing in ({@link signIn}); and screenshots for the docs ({@link screenshot}).
 * playwright-core never downloads a browser: `CHROMIUM` must be installed (`apt-get install -y chromium`;
 * scripts/check-test-deps.mjs says so before `npm test`).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { manifestDir, removeDir, repoRoot, startPunk, type RunningPunk } from '../harness.js';

/** Debian's Chromium (package `chromium`). */
export const CHROMIUM = process.env.PUNK_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** The flags of every test browser: headless, no sandbox (root in CI), and nothing that calls home. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** The desktop viewport of the tests and the screenshots, in CSS pixels. */
export const DESKTOP = { width: 1280, height: 800 };
/** A phone's viewport (an iPhone 14's), in CSS pixels. */
export const PHONE = { width: 390, height: 844 };

/** A running `punk up` for the dashboard tests. */
export interface DashboardPunk {
  /** `http://127.0.0.1:<port>`. */
  baseUrl: string;
  /** The bootstrap admin key (PUNK_AUTH_BOOTSTRAP_ADMIN_KEY): signs in as an admin (unused with authentication off). */
  adminKey: string;
  /** The directory of its manifests, data directory (`data/`) and whatever a test writes there. */
  dir: string;
  punk: RunningPunk;
  /** Stops punk up and removes its directory. */
  close(): Promise<void>;
}

/**
 * Starts `punk up` with `PUNK_AUTH_MODE=on` and a bootstrap admin key (`authentication: false`: off, and no key),
 * an embedded database in a data directory, on `port` (default: a free one), with `files` as its manifest
 * directory's contents (default: none, so no server is managed) and `env` added to its environment.
 */
export async function startDashboardPunk(
  options: { files?: Record<string, string>; env?: Record<string, string>; authentication?: boolean; port?: number } = {},
): Promise<DashboardPunk> {
  const dir = await manifestDir('dashboard', options.files ?? {});
  const adminKey = randomBytes(24).toString('base64url');
  try {
    const punk = await startPunk({
      manifestDir: dir,
      args: ['--data', join(dir, 'data'), ...(options.port === undefined ? [] : ['--port', String(options.port)])],
      env: {
        ...(options.authentication === false
          ? { PUNK_AUTH_MODE: 'off' }
          : // The public URL only names the token audience and resource metadata; the browser uses baseUrl.
            { PUNK_AUTH_MODE: 'on', PUNK_PUBLIC_URL: 'https://punk.example.test', PUNK_AUTH_BOOTSTRAP_ADMIN_KEY: adminKey }),
        ...options.env,
      },
    });
    return {
      baseUrl: punk.baseUrl,
      adminKey,
      dir,
      punk,
      close: async () => {
        await punk.stop();
        await removeDir(dir);
      },
    };
  } catch (error) {
    await removeDir(dir);
    throw error;
  }
}

/** A test browser: one page in a fresh profile. */
export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /**
   * What the page logged as errors (console errors, uncaught exceptions, CSP refusals), but for the 401s of keys:
   * the app asks without a key to learn whether one is needed, and handles every 401 itself.
   */
  errors: string[];
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** Launches {@link CHROMIUM} headless with {@link CHROMIUM_ARGS} in a fresh user-data directory, at `viewport`. */
export async function openBrowser(viewport = DESKTOP): Promise<TestBrowser> {
  const profile = await mkdtemp(join(tmpdir(), 'punk-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const errors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' && !/^Failed to load resource: .* status of 401\b/.test(message.text())) errors.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(error.message));
    return {
      context,
      page,
      errors,
      close: async () => {
        await context.close();
        await removeDir(profile);
      },
    };
  } catch (error) {
    await removeDir(profile);
    throw error;
  }
}

/** Opens the dashboard of `baseUrl` and signs in with `key`; resolves once the navigation is shown. */
export async function signIn(page: Page, baseUrl: string, key: string): Promise<void> {
  await page.goto(`${baseUrl}/ui/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Views' }).waitFor();
}

/**
 * Where the tests save their screenshots: docs/screenshots (the README and docs/dashboard.md show them) when
 * `PUNK_UPDATE_SCREENSHOTS=1`, otherwise a directory under the system's temporary one, so that a test run leaves the
 * checkout as it was (the views show times and ids, so every run draws new pictures).
 */
export const SCREENSHOTS =
  process.env.PUNK_UPDATE_SCREENSHOTS === '1' ? join(repoRoot, 'docs', 'screenshots') : join(tmpdir(), 'punk-screenshots');

/** Saves the page at {@link DESKTOP} size as `<name>.png` in {@link SCREENSHOTS}. */
export async function screenshot(page: Page, name: string): Promise<void> {
  const viewport = page.viewportSize();
  if (viewport?.width !== DESKTOP.width || viewport.height !== DESKTOP.height) await page.setViewportSize(DESKTOP);
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
}
