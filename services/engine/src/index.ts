export * from './agent.js';
export * from './ports.js';
