#!/usr/bin/env node
// The mcp-front process: `node services/mcp-front/dist/main.js` (configuration: docs/distributed.md).
import { runServiceMain } from '@punk/lib';
import { mcpFrontService } from './definition.js';

runServiceMain(mcpFrontService);
