import { describe, expect, it } from 'vitest';
import { CitationStyle, TaskState, type Task } from '@actor/proto/execution';
import { fieldErrors } from '../request-body.js';
import { createTaskBodySchema, createTaskRequest, encodeTask, taskStateName } from './tasks.js';

function errorsOf(body: unknown) {
  const result = createTaskBodySchema.safeParse(body);
  if (result.success) throw new Error(`expected ${JSON.stringify(body)} to be refused`);
  return fieldErrors(result.error);
}

describe('the POST /v1/tasks body', () => {
  it('needs only the task; mode defaults to balanced and the budget to the platform default', () => {
    const body = createTaskBodySchema.parse({ task: 'Summarise RFC 9457' });
    const request = createTaskRequest(body, 'prj_a', 'key-1');
    expect(request).toMatchObject({
      requestId: 'key-1',
      projectId: 'prj_a',
      input: 'Summarise RFC 9457',
      mode: 'balanced',
      budget: { perTaskMicroUsd: 0, perDayMicroUsd: 0 },
      webhooks: [],
      backends: [],
      agentId: '',
      workspace: undefined,
      verify: undefined,
    });
  });

  it('converts every optional field to the CreateTask request', () => {
    const body = createTaskBodySchema.parse({
      task: 'fix the failing test',
      mode: 'cheapest',
      budget: { per_task_usd: 0.25, per_day_usd: 5 },
      webhooks: [{ url: 'https://hooks.example/actor', secret_ref: 'webhook', events: ['task.succeeded'] }],
      agent_id: 'agt_x',
      backends: ['demo:alpha-mini'],
      workspace: { repo: '/src/app' },
      verify: { judge: false, test_command: 'npm test' },
      capabilities: ['vision'],
      attachments: [{ name: 'a.png', media_type: 'image/png', data_base64: 'aGVsbG8=' }],
    });
    expect(createTaskRequest(body, 'prj_a', 'k')).toMatchObject({
      mode: 'cheapest',
      budget: { perTaskMicroUsd: 250_000, perDayMicroUsd: 5_000_000 },
      webhooks: [{ url: 'https://hooks.example/actor', secretRef: 'webhook', events: ['task.succeeded'] }],
      agentId: 'agt_x',
      backends: ['demo:alpha-mini'],
      workspace: { repo: '/src/app', ref: '' },
      verify: { testCommand: 'npm test', judge: false, judgeSet: true },
      capabilities: ['vision'],
      attachments: [{ name: 'a.png', mediaType: 'image/png', dataBase64: 'aGVsbG8=', url: '' }],
    });
  });

  it('refuses a missing, empty or too long task', () => {
    expect(errorsOf({})).toEqual([{ path: 'task', message: expect.any(String) }]);
    expect(errorsOf({ task: '' })[0]!.path).toBe('task');
    expect(errorsOf({ task: 'x'.repeat(100_001) })[0]!.path).toBe('task');
  });

  it('refuses wrong types, naming each field', () => {
    const errors = errorsOf({ task: 42, mode: 1, budget: { per_task_usd: '1' }, backends: 'demo', verify: { judge: 'yes' } });
    expect(errors.map((error) => error.path).sort()).toEqual(['backends', 'budget.per_task_usd', 'mode', 'task', 'verify.judge']);
  });

  it('refuses a body that is not an object', () => {
    expect(errorsOf([])[0]!.path).toBe('(body)');
    expect(errorsOf('task')[0]!.path).toBe('(body)');
    expect(errorsOf(null)[0]!.path).toBe('(body)');
  });

  it('refuses an unknown mode', () => {
    expect(errorsOf({ task: 't', mode: 'smartest' })[0]).toMatchObject({ path: 'mode' });
  });

  it('refuses negative, zero, sub-micro-dollar and absurd budgets', () => {
    expect(errorsOf({ task: 't', budget: { per_task_usd: -1 } })[0]!.path).toBe('budget.per_task_usd');
    expect(errorsOf({ task: 't', budget: { per_day_usd: 0 } })[0]!.path).toBe('budget.per_day_usd');
    expect(errorsOf({ task: 't', budget: { per_task_usd: 0.0000001 } })[0]!.path).toBe('budget.per_task_usd');
    expect(errorsOf({ task: 't', budget: { per_task_usd: 1e12 } })[0]!.path).toBe('budget.per_task_usd');
  });

  it('refuses unknown fields at the top and inside objects', () => {
    expect(errorsOf({ task: 't', priority: 'high' })).toEqual([{ path: 'priority', message: 'unknown field' }]);
    expect(errorsOf({ task: 't', budget: { per_task: 1 } })).toEqual([{ path: 'budget.per_task', message: 'unknown field' }]);
  });

  it('refuses webhooks that are not http(s) URLs and attachments with both or neither source', () => {
    expect(errorsOf({ task: 't', webhooks: [{ url: 'file:///etc/passwd', secret_ref: 's' }] })[0]!.path).toBe('webhooks[0].url');
    expect(errorsOf({ task: 't', webhooks: [{ url: 'not a url', secret_ref: 's' }] })[0]).toEqual({
      path: 'webhooks[0].url',
      message: 'must be an absolute http or https URL',
    });
    // IP literals and single-label hosts are URLs too; whether they may be called is the SSRF guard's call.
    for (const url of ['http://203.0.113.5:8443/hook', 'http://hooks:8080/in', 'https://[2001:db8::1]/h']) {
      expect(createTaskBodySchema.parse({ task: 't', webhooks: [{ url, secret_ref: 's' }] }).webhooks[0]!.url).toBe(url);
    }
    expect(errorsOf({ task: 't', attachments: [{ name: 'a', media_type: 'text/plain' }] })[0]!.path).toBe('attachments[0]');
    expect(
      errorsOf({ task: 't', attachments: [{ name: 'a', media_type: 'text/plain', data_base64: 'aA==', url: 'https://x.example/a' }] })[0]!
        .path,
    ).toBe('attachments[0]');
    expect(errorsOf({ task: 't', attachments: [{ name: 'a', media_type: 'text/plain', data_base64: '%%%' }] })[0]!.path).toBe(
      'attachments[0].data_base64',
    );
  });
});

describe('the task JSON', () => {
  const created = new Date('2026-01-02T03:04:05.000Z');
  const task: Task = {
    id: 'tsk_01JABCDEFGHJKMNPQRSTVWXYZ0',
    projectId: 'prj_default',
    state: TaskState.TASK_STATE_SUCCEEDED,
    input: 'What is 2+2?',
    mode: 'balanced',
    budget: { perTaskMicroUsd: 500_000, perDayMicroUsd: 10_000_000 },
    result: '4',
    error: undefined,
    costMicroUsd: 126_410,
    classification: { taskClass: 'general', vision: false, difficulty: 1, reason: 'arithmetic', source: 'local' },
    explanation: [
      { step: 'place', attempt: 1, message: 'chose demo:alpha-mini', backend: 'demo:alpha-mini', decisionId: 'dec_1', detailJson: '{"winner":"demo:alpha-mini"}', time: created },
      { step: 'evaluate', attempt: 0, message: 'general', backend: '', decisionId: '', detailJson: 'not json', time: undefined },
    ],
    attempts: [
      {
        id: 'att_1',
        number: 1,
        backend: 'demo:alpha-mini',
        modelFamily: 'demo-alpha',
        agentId: 'agt_1',
        decisionId: 'dec_1',
        state: 'passed',
        output: '4',
        error: '',
        costMicroUsd: 4_999,
        inputTokens: 10,
        outputTokens: 1,
        latencyMs: 12,
        verdict: { pass: true, reasons: ['correct'], judgeBackend: 'demo:beta-judge', judgeModelFamily: 'demo-beta', scores: { correctness: 1 }, checks: [] },
        startTime: created,
        finishTime: created,
      },
    ],
    agentId: '',
    backends: [],
    capabilities: [],
    workspace: undefined,
    verify: undefined,
    webhooks: [],
    cancelRequestedBy: '',
    createTime: created,
    startTime: created,
    finishTime: undefined,
    requestId: '',
    lastEventSeq: 7,
    webhookDeliveries: [],
  };

  it('shows state in lower case, costs as {usd, micro_usd}, times as ISO or null', () => {
    const json = encodeTask(task);
    expect(json).toMatchObject({
      id: task.id,
      state: 'succeeded',
      task: 'What is 2+2?',
      budget: { per_task: { usd: 0.5, micro_usd: 500_000 }, per_day: { usd: 10, micro_usd: 10_000_000 } },
      result: '4',
      error: null,
      cost: { usd: 0.13, micro_usd: 126_410 },
      classification: { task_class: 'general', vision: false, difficulty: 1, reason: 'arithmetic', source: 'local' },
      agent_id: null,
      created_at: '2026-01-02T03:04:05.000Z',
      finished_at: null,
      cancel_requested_by: null,
      links: {
        self: `/v1/tasks/${task.id}`,
        events: `/v1/tasks/${task.id}/events`,
        cancel: `/v1/tasks/${task.id}/cancel`,
      },
    });
  });

  it('parses explanation detail, and shows attempts with their verdict', () => {
    const json = encodeTask(task);
    expect(json.explanation[0]).toEqual({
      step: 'place',
      attempt: 1,
      message: 'chose demo:alpha-mini',
      backend: 'demo:alpha-mini',
      decision_id: 'dec_1',
      detail: { winner: 'demo:alpha-mini' },
      time: '2026-01-02T03:04:05.000Z',
    });
    expect(json.explanation[1]).toMatchObject({ backend: null, decision_id: null, detail: null, time: null });
    expect(json.attempts[0]).toMatchObject({
      cost: { usd: 0, micro_usd: 4_999 },
      error: null,
      verdict: { pass: true, judge_backend: 'demo:beta-judge', judge_model_family: 'demo-beta', scores: { correctness: 1 } },
    });
  });

  it('shows webhook deliveries with their status, tries and last error', () => {
    const json = encodeTask({
      ...task,
      webhookDeliveries: [
        {
          id: 'whk_1',
          webhookIndex: 0,
          url: 'https://hooks.example/actor',
          eventType: 'task.succeeded',
          status: 'pending',
          attempts: 2,
          lastStatusCode: 500,
          lastError: 'the receiver answered HTTP 500',
          nextAttemptTime: created,
          createTime: created,
          finishTime: undefined,
        },
        {
          id: 'whk_2',
          webhookIndex: 1,
          url: 'https://other.example/hook',
          eventType: 'task.succeeded',
          status: 'delivered',
          attempts: 1,
          lastStatusCode: 204,
          lastError: '',
          nextAttemptTime: undefined,
          createTime: created,
          finishTime: created,
        },
      ],
    });
    expect(json.webhook_deliveries).toEqual([
      {
        id: 'whk_1',
        webhook_index: 0,
        url: 'https://hooks.example/actor',
        event_type: 'task.succeeded',
        status: 'pending',
        attempts: 2,
        last_status_code: 500,
        last_error: 'the receiver answered HTTP 500',
        next_attempt_at: '2026-01-02T03:04:05.000Z',
        created_at: '2026-01-02T03:04:05.000Z',
        finished_at: null,
      },
      {
        id: 'whk_2',
        webhook_index: 1,
        url: 'https://other.example/hook',
        event_type: 'task.succeeded',
        status: 'delivered',
        attempts: 1,
        last_status_code: 204,
        last_error: null,
        next_attempt_at: null,
        created_at: '2026-01-02T03:04:05.000Z',
        finished_at: '2026-01-02T03:04:05.000Z',
      },
    ]);
  });

  it('shows a failed task with its error and no result', () => {
    const failed = encodeTask({
      ...task,
      state: TaskState.TASK_STATE_FAILED,
      result: '',
      error: { code: 'actor.budget.exceeded', message: 'too small' },
      classification: undefined,
    });
    expect(failed).toMatchObject({ state: 'failed', result: null, error: { code: 'actor.budget.exceeded' }, classification: null });
  });

  it('names every state', () => {
    expect(
      [1, 2, 3, 4, 5, 6].map((state) => taskStateName(state as TaskState)),
    ).toEqual(['queued', 'running', 'verifying', 'succeeded', 'failed', 'cancelled']);
  });
});

describe('the verify checks of a task body', () => {
  it('maps citations, postconditions and the check time limit to the CreateTask request', () => {
    const body = createTaskBodySchema.parse({
      task: 'Send the release mail',
      workspace: { repo: '/srv/app' },
      verify: {
        citations: { style: 'regex', pattern: 'RFC \\d+', min: 2 },
        postconditions: ['test -f sent'],
        check_timeout_ms: 30_000,
      },
    });
    expect(createTaskRequest(body, 'prj_1', 'req_1').verify).toEqual({
      testCommand: '',
      judge: true,
      judgeSet: false,
      citations: { style: CitationStyle.CITATION_STYLE_REGEX, pattern: 'RFC \\d+', min: 2 },
      postconditions: ['test -f sent'],
      checkTimeoutMs: 30_000,
    });
    const url = createTaskBodySchema.parse({ task: 'Research it', verify: { citations: { style: 'url' } } });
    expect(createTaskRequest(url, 'prj_1', 'req_2').verify?.citations).toEqual({ style: CitationStyle.CITATION_STYLE_URL, pattern: '', min: 1 });
  });

  it('names the field of a bad check', () => {
    expect(errorsOf({ task: 't', verify: { postconditions: ['true'] } }).map((error) => error.path)).toEqual(['verify.postconditions']);
    expect(errorsOf({ task: 't', verify: { citations: { style: 'regex' } } }).map((error) => error.path)).toEqual(['verify.citations.pattern']);
    expect(errorsOf({ task: 't', verify: { citations: { style: 'regex', pattern: '(' } } }).map((error) => error.path)).toEqual([
      'verify.citations.pattern',
    ]);
  });
});
