export { startEmbedded, type EmbeddedOptions, type EmbeddedPunk } from './embedded.js';
