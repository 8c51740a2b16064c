#!/usr/bin/env node
// The gateway process: `node services/gateway/dist/main.js` (configuration: docs/distributed.md).
import { runServiceMain } from '@punk/lib';
import { gatewayService } from './definition.js';

runServiceMain(gatewayService);
