import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { addressSetting, ConfigError, integerSetting, loadConfig } from './config.js';

describe('loadConfig', () => {
  const schema = z.object({
    POOL_ADDR: addressSetting('127.0.0.1:50052'),
    EXECUTION_WORKERS: integerSetting(8),
    MODE: z.enum(['a', 'b']),
  });

  it('fills defaults and converts types', () => {
    expect(loadConfig(schema, { MODE: 'a' })).toEqual({ POOL_ADDR: '127.0.0.1:50052', EXECUTION_WORKERS: 8, MODE: 'a' });
    expect(loadConfig(schema, { MODE: 'b', POOL_ADDR: '', EXECUTION_WORKERS: '2' }).EXECUTION_WORKERS).toBe(2);
  });

  it('lists every problem at once, each naming its variable', () => {
    let error: unknown;
    try {
      loadConfig(schema, { POOL_ADDR: 'nowhere', EXECUTION_WORKERS: 'many', MODE: 'c' });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).toMatch(/POOL_ADDR: must be host:port/);
    expect(problems.join('\n')).toMatch(/EXECUTION_WORKERS: must be a non-negative integer/);
    expect(problems.join('\n')).toMatch(/MODE:/);
  });
});
