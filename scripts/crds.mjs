// Writes the CustomResourceDefinitions generated from the McpServer, McpCredential and McpPolicy schemas into crds/
// (`npm run crds`, which builds first). The test services/lib/src/test/crd.test.ts fails
// when the committed files differ from what this writes.
import { mkdir, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { renderCrds } from '../services/lib/dist/index.js';

const dir = fileURLToPath(new URL('../crds/', import.meta.url));
await mkdir(dir, { recursive: true });
for (const [file, text] of renderCrds()) {
  await writeFile(dir + file, text);
  console.log(`wrote crds/${file}`);
}
