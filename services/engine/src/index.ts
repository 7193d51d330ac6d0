export * from './agent.js';
export * from './ports.js';
export * from './classifier.js';
export * from './judge.js';
export * from './format-usd.js';
export * from './pipeline.js';
export * from './testing/in-memory-ports.js';
export * from './citation-check.js';
