#!/usr/bin/env node
// The `actor` command. The repository runs TypeScript through tsx, without a build step: register
// its loader in this process (so Ctrl-C reaches the CLI itself, not a wrapper), then start it.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
