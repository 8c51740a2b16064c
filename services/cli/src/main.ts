#!/usr/bin/env node
// `punk`'s entry point: first the V8 flags Punk runs with (node-flags.ts), then the command (commands.ts), loaded
// only after, so a relaunch costs no module loading.
import { relaunchWithNodeFlags } from './node-flags.js';

relaunchWithNodeFlags();
await import('./commands.js');
