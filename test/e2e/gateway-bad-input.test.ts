import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../support/test-platform.js';

/** Every kind of bad input gets a 4xx application/problem+json answer from the running platform, never a 500. */
describe('bad input at the gateway', () => {
  let platform: TestPlatform;

  beforeAll(async () => {
    platform = await startTestPlatform();
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  });

  async function post(path: string, body: string, headers: Record<string, string> = {}) {
    return fetch(`${platform.url}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${platform.token}`, 'Content-Type': 'application/json', ...headers },
      body,
    });
  }

  async function expectProblem(response: Response, status: number, code?: string) {
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    const problem = (await response.json()) as Record<string, unknown>;
    expect(problem.status).toBe(status);
    expect(problem.title).toEqual(expect.any(String));
    if (code) expect(problem.code).toBe(code);
    return problem;
  }

  const badBodies: Array<[string, string]> = [
    ['invalid JSON', '{"task": "unterminated'],
    ['a JSON array', '[1,2,3]'],
    ['missing task', '{"mode":"balanced"}'],
    ['empty task', '{"task":""}'],
    ['task of the wrong type', '{"task": 42}'],
    ['unknown mode', '{"task":"hi","mode":"turbo"}'],
    ['negative budget', '{"task":"hi","budget":{"per_task_usd":-1}}'],
    ['budget of the wrong type', '{"task":"hi","budget":{"per_day_usd":"lots"}}'],
    ['backends not a list', '{"task":"hi","backends":"demo:alpha-mini"}'],
    ['webhook url not a URL', '{"task":"hi","webhooks":[{"url":"not a url"}]}'],
    ['unknown field', '{"task":"hi","priority":"urgent"}'],
    ['unknown citation style', '{"task":"hi","verify":{"citations":{"style":"footnote"}}}'],
    ['regex citations without a pattern', '{"task":"hi","verify":{"citations":{"style":"regex","min":2}}}'],
    ['a citation pattern that is no regular expression', '{"task":"hi","verify":{"citations":{"style":"regex","pattern":"(["}}}'],
    ['a pattern for url citations', '{"task":"hi","verify":{"citations":{"style":"url","pattern":"x"}}}'],
    ['zero citations asked', '{"task":"hi","verify":{"citations":{"style":"url","min":0}}}'],
    ['postconditions not a list', '{"task":"hi","workspace":{"repo":"/tmp"},"verify":{"postconditions":"true"}}'],
    ['an empty postcondition', '{"task":"hi","workspace":{"repo":"/tmp"},"verify":{"postconditions":["  "]}}'],
    ['a check time limit with nothing to limit', '{"task":"hi","verify":{"check_timeout_ms":1000}}'],
  ];

  it('answers 400 problem+json naming the field for postconditions without a workspace', async () => {
    const problem = await expectProblem(await post('/v1/tasks', '{"task":"Send the email","verify":{"postconditions":["test -f sent"]}}'), 400);
    expect(JSON.stringify(problem)).toContain('postconditions need a workspace');
  });

  it('answers 400 problem+json from execution for postconditions in a workspace that is no git work tree', async () => {
    const body = JSON.stringify({ task: 'Send the email', workspace: { repo: '/proc' }, verify: { postconditions: ['test -f sent'] } });
    const problem = await expectProblem(await post('/v1/tasks', body), 400, 'actor.invalid_argument');
    expect(JSON.stringify(problem)).toContain('is not a git work tree');
  });

  for (const [name, body] of badBodies) {
    it(`answers 400 problem+json for ${name}`, async () => {
      await expectProblem(await post('/v1/tasks', body), 400);
    });
  }

  it('answers 413 for an oversized body', async () => {
    const huge = JSON.stringify({ task: 'x'.repeat(3 * 1024 * 1024) });
    const response = await post('/v1/tasks', huge).catch(() => undefined);
    // The gateway may close the connection after answering; an answer, when read, is a 413 problem.
    if (response) await expectProblem(response, 413);
  });

  it('answers 401 for a missing or invalid token, with WWW-Authenticate', async () => {
    const missing = await fetch(`${platform.url}/v1/tasks`, { method: 'POST', body: '{"task":"hi"}', headers: { 'Content-Type': 'application/json' } });
    await expectProblem(missing, 401);
    expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer/);
    const invalid = await post('/v1/tasks', '{"task":"hi"}', { Authorization: 'Bearer not-a-token' });
    await expectProblem(invalid, 401);
    const malformed = await fetch(`${platform.url}/v1/tasks/tsk_x`, { headers: { Authorization: 'Basic abc' } });
    await expectProblem(malformed, 401);
  });

  it('answers 404 for an unknown task, also for its events and cancel', async () => {
    const headers = { Authorization: `Bearer ${platform.token}` };
    await expectProblem(await fetch(`${platform.url}/v1/tasks/tsk_01UNKNOWN00000000000000000`, { headers }), 404);
    await expectProblem(await fetch(`${platform.url}/v1/tasks/tsk_01UNKNOWN00000000000000000/events`, { headers }), 404);
    await expectProblem(await post('/v1/tasks/tsk_01UNKNOWN00000000000000000/cancel', ''), 404);
  });

  it('answers 404 for an unknown route and 405 for a wrong method', async () => {
    const headers = { Authorization: `Bearer ${platform.token}` };
    await expectProblem(await fetch(`${platform.url}/v1/nothing-here`, { headers }), 404);
    const wrongMethod = await fetch(`${platform.url}/v1/tasks`, { method: 'DELETE', headers });
    await expectProblem(wrongMethod, 405);
    expect(wrongMethod.headers.get('allow')).toBeTruthy();
  });

  it('answers 415 for a body that is not JSON', async () => {
    await expectProblem(await post('/v1/tasks', 'task=hi', { 'Content-Type': 'application/x-www-form-urlencoded' }), 415);
  });

  it('stays healthy after all of it', async () => {
    expect((await fetch(`${platform.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${platform.url}/readyz`)).status).toBe(200);
  });
});
