import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processAlive } from '@actor/kit/testing';
import type { AgentEvent, AgentRequest, AgentResult } from '../agent.js';
import { runAgentConformance } from '../conformance.js';
import { scriptAdapterDefinition } from './script-catalog.js';
import { ScriptAgent } from './script-agent.js';

/** A command that runs a short Node program: portable, and nothing to install. */
const node = (program: string): string[] => [process.execPath, '-e', program];

const upperCase = node("let text = ''; process.stdin.on('data', (c) => (text += c)); process.stdin.on('end', () => process.stdout.write(text.toUpperCase()));");
const slowWords = node("let n = 0; const timer = setInterval(() => { process.stdout.write('word '); if (++n === 200) clearInterval(timer); }, 50);");

runAgentConformance('script (a configured Node command)', () => {
  const definition = scriptAdapterDefinition();
  return {
    agent: definition.create(),
    rateCard: definition.rateCard,
    reportsTokens: false,
    request: (executionId) => ({ executionId, prompt: 'shout this', configuration: { command: upperCase } }),
    slowRequest: (executionId) => ({ executionId, prompt: 'take your time', configuration: { command: slowWords } }),
    broken: {
      agent: definition.create(),
      request: { executionId: 'exe_missing_program', prompt: 'hello', configuration: { command: ['/nonexistent/actor-script'] } },
      errorMatches: /cannot start \/nonexistent\/actor-script: ENOENT/,
    },
  };
});

describe('ScriptAgent', () => {
  const agent = scriptAdapterDefinition().create();

  async function execute(request: Omit<AgentRequest, 'executionId'>, signal = new AbortController().signal): Promise<{ result: AgentResult; events: AgentEvent[] }> {
    const events: AgentEvent[] = [];
    const result = await agent.execute({ executionId: `exe_script_${Math.random()}`, ...request }, signal, (event) => events.push(event));
    return { result, events };
  }

  it('runs the configured command with the task text on stdin; its stdout is the output', async () => {
    const { result } = await execute({ prompt: 'one two three', configuration: { command: ['wc', '-w'] } });
    expect(result).toMatchObject({ success: true, output: '3\n' });
    expect(result.errorKind).toBeUndefined();
  });

  it('never runs anything a task supplies: without a configured command it fails with a clear error', async () => {
    const { result } = await execute({ prompt: 'touch /tmp/actor-script-pwned', workingDirectory: '/tmp' });
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.errorMessage).toMatch(/configuration names no command; an admin must set configuration\.command/);
  });

  it('rejects a configuration whose command is not an argv array', async () => {
    const { result } = await execute({ prompt: 'x', configuration: { command: 'wc -w' } });
    expect(result).toMatchObject({ success: false, errorKind: 'backend' });
    expect(result.errorMessage).toMatch(/configuration is invalid: command/);
  });

  it('fails on a non-zero exit with the exit code and the end of stderr, keeping stdout', async () => {
    const { result } = await execute({
      prompt: 'x',
      configuration: { command: node("process.stdout.write('partial'); process.stderr.write('disk full'); process.exit(3)") },
    });
    expect(result).toMatchObject({ success: false, errorKind: 'backend', output: 'partial' });
    expect(result.errorMessage).toMatch(/exited with code 3; stderr: disk full/);
  });

  it('passes the configured cwd and env, and none of this service\'s own environment', async () => {
    const directory = await realpath(await mkdtemp(join(tmpdir(), 'actor-script-')));
    process.env.ACTOR_SCRIPT_TEST_PRIVATE = 'service-only';
    try {
      const { result } = await execute({
        prompt: 'x',
        configuration: {
          command: node('process.stdout.write(JSON.stringify({ cwd: process.cwd(), greeting: process.env.GREETING, leaked: process.env.ACTOR_SCRIPT_TEST_PRIVATE ?? null }))'),
          cwd: directory,
          env: { GREETING: 'hello' },
        },
      });
      expect(result.success).toBe(true);
      expect(JSON.parse(result.output)).toEqual({ cwd: directory, greeting: 'hello', leaked: null });
    } finally {
      delete process.env.ACTOR_SCRIPT_TEST_PRIVATE;
      await rm(directory, { recursive: true, force: true });
    }
  });

  it('applies the configured timeout_ms when it is the strictest limit', async () => {
    const { result } = await execute({ prompt: 'x', timeoutMs: 60_000, configuration: { command: slowWords, timeout_ms: 400 } });
    expect(result).toMatchObject({ success: false, errorKind: 'timeout' });
    expect(result.errorMessage).toMatch(/400 ms/);
  });

  it('kills the whole process group on cancel, children included', async () => {
    // The command starts a long-lived child, prints its pid, then waits on it.
    const command = node(
      "const { spawn } = require('node:child_process'); const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' }); process.stdout.write(String(child.pid)); setTimeout(() => {}, 60000);",
    );
    const controller = new AbortController();
    let childPid = 0;
    const running = agent.execute({ executionId: 'exe_script_group', prompt: 'x', configuration: { command } }, controller.signal, (event) => {
      if (event.kind === 'output') {
        childPid = Number(event.text);
        controller.abort();
      }
    });
    const result = await running;
    expect(result).toMatchObject({ success: false, errorKind: 'cancelled' });
    expect(childPid).toBeGreaterThan(0);
    await expect.poll(() => processAlive(childPid), { timeout: 10_000, interval: 50 }).toBe(false);
  });

  describe('bring-your-own keys in request.environment', () => {
    const secret = 'sk-byo-9f8e7d6c5b4a39281706';
    let result: AgentResult;
    let events: AgentEvent[];

    beforeAll(async () => {
      // The script proves it got the key, then leaks it every way it can: stdout split across two
      // writes (so a chunk-by-chunk filter would miss it), stderr, and a failing exit.
      const program = [
        "const key = process.env.BACKEND_API_KEY;",
        "process.stdout.write('received ' + key.length + ' characters; key=' + key.slice(0, 10));",
        "setTimeout(() => { process.stdout.write(key.slice(10) + ' done'); process.stderr.write('auth failed for ' + key); process.exit(1); }, 100);",
      ].join(' ');
      ({ result, events } = await execute({ prompt: 'x', environment: { BACKEND_API_KEY: secret }, configuration: { command: node(program) } }));
    });

    it('reaches the command in its environment', () => {
      expect(result.output).toContain(`received ${secret.length} characters`);
    });

    it('never appears in output, events, the error or the execution log', () => {
      const everything = JSON.stringify({ result, events });
      expect(everything).not.toContain(secret);
      expect(everything).not.toContain(secret.slice(10));
      expect(result.output).toContain('key=[redacted] done');
      expect(result.errorMessage).toMatch(/auth failed for \[redacted\]/);
    });
  });
});

describe('scriptAdapterDefinition', () => {
  it('declares a first-party, tier-1 adapter of no model family, priced by the second, with no default slot', () => {
    const definition = scriptAdapterDefinition();
    expect(definition.declaration).toMatchObject({ type: 'script', modelFamily: 'none', qualityTier: 1, capabilities: ['action', 'general'], demo: false });
    expect(definition.rateCard).toMatchObject({ inputMicroUsdPerMtok: 0, outputMicroUsdPerMtok: 0, microUsdPerTask: 0, microUsdPerSecond: 1 });
    expect(definition.defaultSlot).toBe(false);
    expect(definition.create()).toBeInstanceOf(ScriptAgent);
  });
});
