import { describe, expect, it } from 'vitest';
import { UsageError, parseAdaptersArguments, parseRunArguments } from './arguments.js';

function usageError(args: string[]): string {
  try {
    parseRunArguments(args);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as UsageError).message;
  }
  throw new Error(`no usage error for ${args.join(' ')}`);
}

describe('actor run arguments', () => {
  it('has the documented defaults', () => {
    const parsed = parseRunArguments(['Write', 'a haiku']);
    expect(parsed).toEqual({
      help: false,
      run: {
        prompt: 'Write a haiku',
        mode: 'balanced',
        budgetUsd: 0.5,
        dayBudgetUsd: 10,
        backends: [],
        repo: undefined,
        ref: undefined,
        testCommand: undefined,
        json: false,
        judge: true,
        maxAttempts: 3,
        timeoutMs: 120_000,
        agentConfiguration: undefined,
        concurrency: 4,
      },
    });
  });

  it('reads every option', () => {
    const parsed = parseRunArguments([
      '-m', 'cheapest', '--budget-usd', '0.25', '--day-budget-usd', '2', '-b', 'demo:alpha-pro', '--backend', 'demo:beta-large',
      '--repo', '/tmp/r', '--ref', 'main', '--test', 'npm test', '--json', '--no-judge', '--max-attempts', '5',
      '--classifier', 'demo:beta-small', '--timeout-s', '30', '--agent-config', '{"quality":1}', '--concurrency', '2', 'Fix it',
    ]);
    expect(parsed.help).toBe(false);
    if (parsed.help) return;
    expect(parsed.run).toMatchObject({
      prompt: 'Fix it',
      mode: 'cheapest',
      budgetUsd: 0.25,
      dayBudgetUsd: 2,
      backends: ['demo:alpha-pro', 'demo:beta-large'],
      repo: '/tmp/r',
      ref: 'main',
      testCommand: 'npm test',
      json: true,
      judge: false,
      maxAttempts: 5,
      classifierBackend: 'demo:beta-small',
      timeoutMs: 30_000,
      agentConfiguration: { quality: 1 },
      concurrency: 2,
    });
  });

  it('says what is wrong with a bad value', () => {
    expect(usageError(['--mode', 'quickest', 'x'])).toBe('--mode must be one of cheapest, balanced, best, fastest, private');
    expect(usageError(['--budget-usd', 'abc', 'x'])).toBe('--budget-usd must be a number of US dollars, such as 0.50');
    expect(usageError(['--budget-usd', '0', 'x'])).toBe('--budget-usd must be more than 0');
    expect(usageError(['--max-attempts', '1.5', 'x'])).toBe('--max-attempts must be a whole number');
    expect(usageError(['--agent-config', '[1]', 'x'])).toContain('--agent-config must be a JSON object');
    expect(usageError(['--agent-config', '{nope', 'x'])).toContain('--agent-config must be a JSON object');
    expect(usageError(['--json'])).toContain('the task is missing');
    expect(usageError(['--ref', 'main', 'x'])).toContain('--ref needs --repo');
  });

  it('refuses unknown flags and flags without their value', () => {
    expect(usageError(['--mdoe', 'best', 'x'])).toBe("unknown option '--mdoe'");
    expect(usageError(['x', '--budget-usd'])).toContain("'--budget-usd <value>' argument missing");
  });

  it('answers --help without checking anything else', () => {
    expect(parseRunArguments(['--help', '--mode', 'nonsense'])).toEqual({ help: true });
  });
});

describe('actor adapters arguments', () => {
  it('takes --json and nothing else', () => {
    expect(parseAdaptersArguments(['--json'])).toEqual({ help: false, json: true });
    expect(() => parseAdaptersArguments(['extra'])).toThrow('unexpected argument "extra"');
  });
});
