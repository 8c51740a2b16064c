// Writes the CustomResourceDefinitions generated from the McpServer, McpCredential and McpPolicy schemas into crds/
// and into the Helm chart's charts/punk/crds/ (`npm run crds`, which builds first). The tests
// services/lib/src/test/crd.test.ts and operator/src/test/chart.test.ts fail when the committed files differ
// from what this writes.
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { renderCrds } from '../services/lib/dist/index.js';

for (const target of ['crds/', 'charts/punk/crds/']) {
  const dir = fileURLToPath(new URL(`../${target}`, import.meta.url));
  await mkdir(dir, { recursive: true });
  for (const [file, text] of renderCrds()) {
    await writeFile(dir + file, text);
    console.log(`wrote ${target}${file}`);
  }
}
