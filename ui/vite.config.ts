// Vite builds the dashboard into dist/: index.html and content-hashed assets under dist/assets/, all served by
// mcp-front at /ui (services/mcp-front/src/ui.ts). No plugin: oxc compiles the JSX for Preact.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { outDir: 'dist', emptyOutDir: true, assetsInlineLimit: 0, modulePreload: { polyfill: false }, sourcemap: false },
});
