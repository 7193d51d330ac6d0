/**
 * The OpenAPI 3.1 description of the REST API, served at GET /openapi.json. Written by hand: keep
 * it in step with the routes (gateway-server.test.ts checks that every route is described).
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const problemResponse = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ref('Problem') } },
});
const jsonResponse = (description: string, schema: object, headers?: object) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});
const nullable = (schema: object) => ({ oneOf: [schema, { type: 'null' }] });
const timestamp = { type: 'string', format: 'date-time' };
const commonErrors = {
  '401': problemResponse('Missing or invalid bearer token (`WWW-Authenticate: Bearer`).'),
  '403': problemResponse('The token lacks the scope this route needs.'),
  '503': problemResponse('A service behind the gateway is unavailable; retry.'),
};
const idParameter = (description: string) => ({
  name: 'id',
  in: 'path',
  required: true,
  description,
  schema: { type: 'string' },
});
const secretNameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: 'The secret name.',
  schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9_.-]{0,62}$' },
};
const jsonBody = (schema: object) => ({ required: true, content: { 'application/json': { schema } } });
const bodyErrors = {
  '400': problemResponse('Invalid JSON (`actor.invalid_json`) or invalid fields (`actor.invalid_argument`, with `errors`).'),
  '413': problemResponse('The body is larger than GATEWAY_MAX_BODY_BYTES.'),
  '415': problemResponse('The body is not application/json.'),
};

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Actor',
    version: '1.0.0',
    description:
      'One API where any task goes to the best agent system for it. Costs are `{usd, micro_usd}`: `usd` rounded ' +
      'to the cent, `micro_usd` exact. Errors are RFC 9457 problem documents with a stable `code`.',
  },
  servers: [{ url: '/' }],
  security: [{ bearer: [] }],
  paths: {
    '/v1/tasks': {
      post: {
        summary: 'Create a task',
        description: 'Needs scope `tasks:write`. A repeated `Idempotency-Key` returns the task first created with it (200).',
        parameters: [
          { name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', maxLength: 200 } },
        ],
        requestBody: jsonBody(ref('CreateTask')),
        responses: {
          '201': jsonResponse('The task, queued.', ref('Task'), { Location: { schema: { type: 'string' } } }),
          '200': jsonResponse('The task created earlier with this Idempotency-Key.', ref('Task')),
          ...bodyErrors,
          ...commonErrors,
        },
      },
      get: {
        summary: 'List tasks, newest first',
        description: 'Needs scope `tasks:read`. Tasks in a list carry empty `explanation` and `attempts`.',
        parameters: [
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200, default: 50 } },
          { name: 'page_token', in: 'query', schema: { type: 'string' } },
          { name: 'state', in: 'query', schema: ref('TaskState') },
        ],
        responses: {
          '200': jsonResponse('A page of tasks.', {
            type: 'object',
            required: ['data', 'next_page_token'],
            properties: { data: { type: 'array', items: ref('Task') }, next_page_token: nullable({ type: 'string' }) },
          }),
          '400': problemResponse('Invalid query.'),
          ...commonErrors,
        },
      },
    },
    '/v1/tasks/{id}': {
      get: {
        summary: 'Get a task with its explanation and attempts',
        parameters: [idParameter('The task id (`tsk_...`).')],
        responses: { '200': jsonResponse('The task.', ref('Task')), '404': problemResponse('No such task.'), ...commonErrors },
      },
    },
    '/v1/tasks/{id}/cancel': {
      post: {
        summary: 'Ask a task to stop',
        description:
          'Needs scope `tasks:write`. A queued task is cancelled at once; a running one is stopped through its ' +
          'backend. Cancelling a finished task returns it unchanged.',
        parameters: [idParameter('The task id.')],
        responses: { '202': jsonResponse('The task after the request.', ref('Task')), '404': problemResponse('No such task.'), ...commonErrors },
      },
    },
    '/v1/tasks/{id}/events': {
      get: {
        summary: 'Follow a task (server-sent events)',
        description:
          'Each event has `id:` = its seq, `event:` = `state` | `output` | `end`, `data:` = a JSON object. Events after ' +
          '`Last-Event-ID` (or `after`) are replayed, then live ones follow; the stream closes after `end`. ' +
          '`: keepalive` comments arrive every GATEWAY_SSE_KEEPALIVE_MS.',
        parameters: [
          idParameter('The task id.'),
          { name: 'Last-Event-ID', in: 'header', schema: { type: 'integer', minimum: 0 } },
          { name: 'after', in: 'query', schema: { type: 'integer', minimum: 0 } },
        ],
        responses: {
          '200': { description: 'The event stream.', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          '400': problemResponse('Invalid Last-Event-ID or after.'),
          '404': problemResponse('No such task.'),
          ...commonErrors,
        },
      },
    },
    '/v1/adapters': {
      get: {
        summary: 'List the declared backends with their rate cards',
        parameters: [{ name: 'ready', in: 'query', schema: { type: 'boolean' }, description: 'Only ready adapters.' }],
        responses: {
          '200': jsonResponse('The adapters, by type.', {
            type: 'object',
            required: ['data'],
            properties: { data: { type: 'array', items: ref('Adapter') } },
          }),
          ...commonErrors,
        },
      },
    },
    '/v1/usage': {
      get: {
        summary: "The project's spend of one UTC day",
        description: 'Needs scope `usage:read`.',
        parameters: [{ name: 'day', in: 'query', schema: { type: 'string', format: 'date' }, description: 'Default today (UTC).' }],
        responses: { '200': jsonResponse('The spend.', ref('Usage')), '400': problemResponse('Invalid day.'), ...commonErrors },
      },
    },
    '/v1/secrets': {
      get: {
        summary: "List the project's secrets, by name",
        description: 'Needs scope `secrets:admin`. Names, versions and times only: never a value or anything derived from one.',
        responses: {
          '200': jsonResponse('The secrets.', {
            type: 'object',
            required: ['data'],
            properties: { data: { type: 'array', items: ref('Secret') } },
          }),
          ...commonErrors,
        },
      },
    },
    '/v1/secrets/{name}': {
      put: {
        summary: 'Create or rotate a project secret',
        description:
          'Needs scope `secrets:admin`. Stored encrypted; webhooks name it in `secret_ref`, agent slots in ' +
          '`api_key_secret`. Writing an existing name replaces its value (rotation: `version` + 1). The value is never returned.',
        parameters: [secretNameParameter],
        requestBody: jsonBody(ref('SecretInput')),
        responses: {
          '201': jsonResponse('Created.', ref('Secret')),
          '200': jsonResponse('Replaced (rotated).', ref('Secret')),
          ...bodyErrors,
          ...commonErrors,
        },
      },
      delete: {
        summary: 'Delete a project secret',
        description: 'Needs scope `secrets:admin`. Webhooks and agent slots that still name it fail to resolve it afterwards.',
        parameters: [secretNameParameter],
        responses: {
          '204': { description: 'Deleted.' },
          '400': problemResponse('Invalid name.'),
          '404': problemResponse('No secret of that name (`actor.secret.not_found`).'),
          ...commonErrors,
        },
      },
    },
    '/api/v1/agents': {
      get: {
        summary: 'List pool agents, by name',
        parameters: [{ name: 'agent_type', in: 'query', schema: { type: 'string' } }],
        responses: {
          '200': jsonResponse('The agents.', {
            type: 'object',
            required: ['data'],
            properties: { data: { type: 'array', items: ref('Agent') } },
          }),
          ...commonErrors,
        },
      },
      post: {
        summary: 'Create a pool agent',
        description: 'Needs scope `agents:admin`.',
        requestBody: jsonBody(ref('AgentInput')),
        responses: {
          '201': jsonResponse('The agent.', ref('Agent'), { Location: { schema: { type: 'string' } } }),
          '409': problemResponse('The name is taken.'),
          ...bodyErrors,
          ...commonErrors,
        },
      },
    },
    '/api/v1/agents/{id}': {
      get: {
        summary: 'Get a pool agent',
        parameters: [idParameter('The agent id (`agt_...`).')],
        responses: { '200': jsonResponse('The agent.', ref('Agent')), '404': problemResponse('No such agent.'), ...commonErrors },
      },
      put: {
        summary: "Replace a pool agent's fields",
        description: 'Needs scope `agents:admin`. Every field is replaced; omitted ones take their defaults.',
        parameters: [idParameter('The agent id.')],
        requestBody: jsonBody(ref('AgentInput')),
        responses: {
          '200': jsonResponse('The agent.', ref('Agent')),
          '404': problemResponse('No such agent.'),
          ...bodyErrors,
          ...commonErrors,
        },
      },
      delete: {
        summary: 'Delete a pool agent',
        description: 'Needs scope `agents:admin`.',
        parameters: [idParameter('The agent id.')],
        responses: {
          '204': { description: 'Deleted.' },
          '404': problemResponse('No such agent.'),
          '409': problemResponse('The agent holds an active lease (`FAILED_PRECONDITION`).'),
          ...commonErrors,
        },
      },
    },
    '/healthz': {
      get: {
        summary: 'Liveness: the gateway process answers',
        security: [],
        responses: { '200': jsonResponse('Alive.', { type: 'object', properties: { status: { const: 'ok' } } }) },
      },
    },
    '/readyz': {
      get: {
        summary: 'Readiness: every service answers grpc.health.v1 SERVING within 1 s',
        security: [],
        responses: {
          '200': jsonResponse('Ready.', ref('Readiness')),
          '503': jsonResponse('Not ready; `not_ready` names the services that are not serving.', ref('Readiness')),
        },
      },
    },
    '/openapi.json': {
      get: { summary: 'This document', security: [], responses: { '200': jsonResponse('OpenAPI 3.1.', { type: 'object' }) } },
    },
    '/metrics': {
      get: {
        summary: 'Prometheus metrics: requests by route and status, SSE connections open',
        security: [],
        responses: { '200': { description: 'Text exposition format.', content: { 'text/plain': { schema: { type: 'string' } } } } },
      },
    },
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An Actor API token.' } },
    schemas: {
      SecretInput: {
        type: 'object',
        required: ['value'],
        additionalProperties: false,
        properties: { value: { type: 'string', minLength: 1, description: 'The secret, at most 16 KiB of UTF-8.' } },
      },
      Secret: {
        type: 'object',
        required: ['name', 'version', 'created_at', 'updated_at'],
        description: 'A stored secret without its value.',
        properties: {
          name: { type: 'string' },
          version: { type: 'integer', description: 'Grows by one on each write; 1 when created.' },
          created_at: timestamp,
          updated_at: { ...timestamp, description: 'When the value was last written.' },
        },
      },
      Cost: {
        type: 'object',
        required: ['usd', 'micro_usd'],
        properties: {
          usd: { type: 'number', description: 'Rounded half-up to the cent.' },
          micro_usd: { type: 'integer', description: 'Exact, in millionths of a dollar.' },
        },
      },
      Problem: {
        type: 'object',
        required: ['type', 'title', 'status', 'detail', 'code'],
        properties: {
          type: { type: 'string', description: '`urn:actor:problem:<code>`.' },
          title: { type: 'string' },
          status: { type: 'integer' },
          detail: { type: 'string' },
          code: { type: 'string', description: 'Stable: `actor.budget.exceeded`, `actor.invalid_argument`, ...' },
          instance: { type: 'string', description: 'The request path.' },
          errors: {
            type: 'array',
            items: {
              type: 'object',
              required: ['path', 'message'],
              properties: { path: { type: 'string' }, message: { type: 'string' } },
            },
          },
        },
      },
      TaskState: { type: 'string', enum: ['queued', 'running', 'verifying', 'succeeded', 'failed', 'cancelled'] },
      Mode: { type: 'string', enum: ['cheapest', 'balanced', 'best', 'fastest', 'private'], default: 'balanced' },
      CreateTask: {
        type: 'object',
        additionalProperties: false,
        required: ['task'],
        properties: {
          task: { type: 'string', minLength: 1, maxLength: 100_000 },
          mode: ref('Mode'),
          budget: {
            type: 'object',
            additionalProperties: false,
            description: 'Hard limits in dollars; absent means the platform default.',
            properties: {
              per_task_usd: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 },
              per_day_usd: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 },
            },
          },
          webhooks: {
            type: 'array',
            maxItems: 10,
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['url', 'secret_ref'],
              properties: {
                url: { type: 'string', format: 'uri' },
                secret_ref: { type: 'string', description: 'The project secret that signs deliveries.' },
                events: { type: 'array', items: { type: 'string' }, description: 'task.queued, task.running, task.verifying, task.succeeded, task.failed, task.cancelled, or task.* for all. Empty: the terminal three.' },
              },
            },
          },
          agent_id: { type: 'string', description: 'An explicitly assigned pool agent.' },
          backends: { type: 'array', items: { type: 'string' }, description: 'The only adapter types allowed.' },
          workspace: {
            type: 'object',
            additionalProperties: false,
            required: ['repo'],
            properties: { repo: { type: 'string' }, ref: { type: 'string' } },
          },
          verify: {
            type: 'object',
            additionalProperties: false,
            description: "The task's own checks (citations, test command, postconditions, in that order) run before the judge; the first that fails rejects the attempt, which escalates.",
            properties: {
              judge: { type: 'boolean', default: true },
              test_command: { type: 'string', maxLength: 4000 },
              citations: {
                type: 'object',
                additionalProperties: false,
                required: ['style'],
                description: 'Citations the answer must carry: `url` counts distinct http(s) URLs, `numbered` markers [n] with an entry line starting with [n], `regex` distinct matches of `pattern`.',
                properties: {
                  style: { type: 'string', enum: ['url', 'numbered', 'regex'] },
                  pattern: { type: 'string', maxLength: 500, description: 'For style regex only: a JavaScript regular expression, flags gm.' },
                  min: { type: 'integer', minimum: 1, maximum: 1000, default: 1 },
                },
              },
              postconditions: {
                type: 'array',
                minItems: 1,
                maxItems: 16,
                items: { type: 'string', minLength: 1, maxLength: 4000 },
                description: 'Shell commands that must each exit 0 in the attempt working copy after the work; need `workspace`.',
              },
              check_timeout_ms: { type: 'integer', minimum: 1, description: "Lowers the service's time limit of each check command." },
            },
          },
          capabilities: { type: 'array', items: { type: 'string' } },
          attachments: {
            type: 'array',
            maxItems: 20,
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['name', 'media_type'],
              description: 'Exactly one of data_base64 and url.',
              properties: {
                name: { type: 'string' },
                media_type: { type: 'string' },
                data_base64: { type: 'string', contentEncoding: 'base64' },
                url: { type: 'string', format: 'uri' },
              },
            },
          },
        },
      },
      Task: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          state: ref('TaskState'),
          mode: ref('Mode'),
          task: { type: 'string' },
          budget: { type: 'object', properties: { per_task: ref('Cost'), per_day: ref('Cost') } },
          result: nullable({ type: 'string' }),
          error: nullable({ type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } }),
          cost: ref('Cost'),
          classification: nullable({
            type: 'object',
            properties: {
              task_class: { type: 'string', enum: ['code', 'research', 'action', 'general'] },
              vision: { type: 'boolean' },
              difficulty: { type: 'integer', minimum: 1, maximum: 3 },
              reason: { type: 'string' },
              source: { type: 'string', enum: ['local', 'model'] },
            },
          }),
          explanation: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                step: { type: 'string' },
                attempt: { type: 'integer' },
                message: { type: 'string' },
                backend: nullable({ type: 'string' }),
                decision_id: nullable({ type: 'string' }),
                detail: nullable({ type: 'object' }),
                time: nullable(timestamp),
              },
            },
          },
          attempts: { type: 'array', items: ref('Attempt') },
          agent_id: nullable({ type: 'string' }),
          backends: { type: 'array', items: { type: 'string' } },
          capabilities: { type: 'array', items: { type: 'string' } },
          workspace: nullable({ type: 'object', properties: { repo: { type: 'string' }, ref: { type: 'string' } } }),
          verify: nullable({
            type: 'object',
            properties: {
              judge: { type: 'boolean' },
              test_command: nullable({ type: 'string' }),
              citations: nullable({ type: 'object', properties: { style: { type: 'string' }, pattern: nullable({ type: 'string' }), min: { type: 'integer' } } }),
              postconditions: { type: 'array', items: { type: 'string' } },
              check_timeout_ms: nullable({ type: 'integer' }),
            },
          }),
          webhooks: { type: 'array', items: { type: 'object' } },
          webhook_deliveries: {
            type: 'array',
            description: 'Each state change sent to each webhook (Standard Webhooks); empty in lists.',
            items: {
              type: 'object',
              properties: {
                id: { type: 'string', description: 'The webhook-id header, the same on every retry.' },
                webhook_index: { type: 'integer' },
                url: { type: 'string' },
                event_type: { type: 'string' },
                status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
                attempts: { type: 'integer' },
                last_status_code: nullable({ type: 'integer' }),
                last_error: nullable({ type: 'string' }),
                next_attempt_at: nullable(timestamp),
                created_at: nullable(timestamp),
                finished_at: nullable(timestamp),
              },
            },
          },
          created_at: nullable(timestamp),
          started_at: nullable(timestamp),
          finished_at: nullable(timestamp),
          cancel_requested_by: nullable({ type: 'string' }),
          links: {
            type: 'object',
            properties: { self: { type: 'string' }, events: { type: 'string' }, cancel: { type: 'string' } },
          },
        },
      },
      Attempt: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          number: { type: 'integer' },
          backend: { type: 'string' },
          model_family: { type: 'string' },
          agent_id: nullable({ type: 'string' }),
          decision_id: nullable({ type: 'string' }),
          state: { type: 'string', enum: ['running', 'verifying', 'passed', 'rejected', 'errored', 'cancelled'] },
          output: { type: 'string' },
          error: nullable({ type: 'string' }),
          cost: ref('Cost'),
          input_tokens: { type: 'integer' },
          output_tokens: { type: 'integer' },
          latency_ms: { type: 'integer' },
          verdict: nullable({
            type: 'object',
            properties: {
              pass: { type: 'boolean' },
              reasons: { type: 'array', items: { type: 'string' } },
              judge_backend: { type: 'string' },
              judge_model_family: { type: 'string' },
              scores: { type: 'object', additionalProperties: { type: 'number' } },
              checks: { type: 'array', items: { type: 'string' } },
            },
          }),
          started_at: nullable(timestamp),
          finished_at: nullable(timestamp),
        },
      },
      Adapter: {
        type: 'object',
        properties: {
          type: { type: 'string' },
          display_name: { type: 'string' },
          model_family: { type: 'string' },
          capabilities: { type: 'array', items: { type: 'string' } },
          limits: {
            type: 'object',
            properties: {
              context_tokens: { type: 'integer' },
              max_output_tokens: { type: 'integer' },
              concurrency: { type: 'integer' },
              timeout_ms: { type: 'integer' },
              egress: { type: 'boolean' },
            },
          },
          trust_class: { type: 'string', enum: ['first_party', 'user_owned', 'partner', 'community', 'external'] },
          quality_tier: { type: 'integer', minimum: 1, maximum: 5 },
          accepts_byo_key: { type: 'boolean' },
          requires_byo_key: { type: 'boolean' },
          demo: { type: 'boolean', description: 'A built-in simulated backend.' },
          ready: { type: 'boolean' },
          ready_reason: { type: 'string' },
          rate_card: nullable({
            type: 'object',
            properties: {
              revision: { type: 'integer' },
              input_usd_per_mtok: { type: 'number' },
              output_usd_per_mtok: { type: 'number' },
              usd_per_second: { type: 'number' },
              usd_per_task: { type: 'number' },
              source: { type: 'string' },
              verified_at: nullable(timestamp),
              reviewer: { type: 'string' },
            },
          }),
          updated_at: nullable(timestamp),
        },
      },
      AgentInput: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'agent_type'],
        properties: {
          name: { type: 'string', minLength: 1, maxLength: 200 },
          agent_type: { type: 'string' },
          description: { type: 'string', default: '' },
          capabilities: { type: 'array', items: { type: 'string' }, default: ['*'] },
          configuration: { type: 'object', default: {} },
          enabled: { type: 'boolean', default: true },
          concurrency: { type: 'integer', minimum: 1, maximum: 1000, default: 1 },
          id: { type: 'string', readOnly: true, description: 'Ignored; on PUT it must match the path if sent.' },
          created_at: { ...nullable(timestamp), readOnly: true },
          updated_at: { ...nullable(timestamp), readOnly: true },
        },
      },
      Agent: {
        type: 'object',
        properties: {
          id: { type: 'string' },
          name: { type: 'string' },
          description: { type: 'string' },
          agent_type: { type: 'string' },
          capabilities: { type: 'array', items: { type: 'string' } },
          configuration: { type: 'object' },
          enabled: { type: 'boolean' },
          concurrency: { type: 'integer' },
          created_at: nullable(timestamp),
          updated_at: nullable(timestamp),
        },
      },
      Usage: {
        type: 'object',
        properties: {
          day: { type: 'string', format: 'date' },
          total: ref('Cost'),
          reserved: ref('Cost'),
          by_backend: {
            type: 'array',
            items: {
              type: 'object',
              properties: { backend: { type: 'string' }, cost: ref('Cost'), calls: { type: 'integer' } },
            },
          },
        },
      },
      Readiness: {
        type: 'object',
        properties: {
          status: { type: 'string', enum: ['ready', 'not_ready'] },
          services: {
            type: 'object',
            additionalProperties: { type: 'string', enum: ['serving', 'not_serving', 'unreachable'] },
          },
          not_ready: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
};
