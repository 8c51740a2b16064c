#!/usr/bin/env node
// The ledger process: `node services/ledger/dist/main.js` (configuration: docs/distributed.md).
import { runServiceMain } from '@punk/lib';
import { ledgerService } from './definition.js';

runServiceMain(ledgerService);
