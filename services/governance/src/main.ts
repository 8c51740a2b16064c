#!/usr/bin/env node
// The governance process: `node services/governance/dist/main.js` (configuration: docs/distributed.md).
import { runServiceMain } from '@punk/lib';
import { governanceService } from './definition.js';

runServiceMain(governanceService);
