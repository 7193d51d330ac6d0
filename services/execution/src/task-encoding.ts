import {
  TaskState,
  type Attempt,
  type ExplanationEntry,
  type Task,
  type TaskEvent,
  type WebhookDelivery,
} from '@actor/proto/execution';
import type { AttemptRow, EventRow, ExplanationRow, TaskRow, WebhookDeliveryRow } from './db/task-repository.js';
import { encodeVerify } from './domain/task-verify.js';

const stateToProto: Record<string, TaskState> = {
  queued: TaskState.TASK_STATE_QUEUED,
  running: TaskState.TASK_STATE_RUNNING,
  verifying: TaskState.TASK_STATE_VERIFYING,
  succeeded: TaskState.TASK_STATE_SUCCEEDED,
  failed: TaskState.TASK_STATE_FAILED,
  cancelled: TaskState.TASK_STATE_CANCELLED,
};

export function stateFromProto(state: TaskState): string | undefined {
  return Object.entries(stateToProto).find(([, value]) => value === state)?.[0];
}

type StoredVerdict = {
  pass: boolean;
  reasons: string[];
  judgeBackend: string;
  judgeModelFamily: string;
  scores: Record<string, number>;
  checks: string[];
};

function encodeAttempt(row: AttemptRow): Attempt {
  const verdict = row.verdict as StoredVerdict | null;
  return {
    id: row.id,
    number: row.number,
    backend: row.backend,
    modelFamily: row.modelFamily,
    agentId: row.agentId ?? '',
    decisionId: row.decisionId,
    state: row.state,
    output: row.output,
    error: row.error ?? '',
    costMicroUsd: row.costMicroUsd,
    inputTokens: row.inputTokens,
    outputTokens: row.outputTokens,
    latencyMs: row.latencyMs,
    verdict: verdict
      ? {
          pass: verdict.pass,
          reasons: verdict.reasons ?? [],
          judgeBackend: verdict.judgeBackend ?? '',
          judgeModelFamily: verdict.judgeModelFamily ?? '',
          scores: verdict.scores ?? {},
          checks: verdict.checks ?? [],
        }
      : undefined,
    startTime: row.startedAt,
    finishTime: row.finishedAt ?? undefined,
  };
}

function encodeExplanation(row: ExplanationRow): ExplanationEntry {
  return {
    step: row.step,
    attempt: row.attempt,
    message: row.message,
    backend: row.backend ?? '',
    decisionId: row.decisionId ?? '',
    detailJson: row.detail === null || row.detail === undefined ? '' : JSON.stringify(row.detail),
    time: row.createdAt,
  };
}

function encodeWebhookDelivery(row: WebhookDeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    webhookIndex: row.webhookIndex,
    url: row.url,
    eventType: row.eventType,
    status: row.status,
    attempts: row.attempts,
    lastStatusCode: row.lastStatusCode ?? 0,
    lastError: row.lastError ?? '',
    nextAttemptTime: row.status === 'pending' ? row.nextAttemptAt : undefined,
    createTime: row.createdAt,
    finishTime: row.finishedAt ?? undefined,
  };
}

/** A task row (and, for single reads, its attempts, explanation and webhook deliveries) as the proto Task. */
export function encodeTask(
  row: TaskRow,
  details: { attempts: AttemptRow[]; explanation: ExplanationRow[]; webhookDeliveries?: WebhookDeliveryRow[] } = {
    attempts: [],
    explanation: [],
  },
): Task {
  const classification = row.classification as
    | { taskClass: string; vision: boolean; difficulty: number; reason: string; source?: string }
    | null;
  return {
    id: row.id,
    projectId: row.projectId,
    state: stateToProto[row.state] ?? TaskState.TASK_STATE_UNSPECIFIED,
    input: row.input,
    mode: row.mode,
    budget: { perTaskMicroUsd: row.perTaskMicroUsd, perDayMicroUsd: row.perDayMicroUsd },
    result: row.result ?? '',
    error: row.errorCode ? { code: row.errorCode, message: row.errorMessage ?? '' } : undefined,
    costMicroUsd: row.costMicroUsd,
    // Rows classified before the model classifier existed carry no source: the local classifier made them.
    classification: classification ? { ...classification, source: classification.source ?? 'local' } : undefined,
    explanation: details.explanation.map(encodeExplanation),
    attempts: details.attempts.map(encodeAttempt),
    agentId: row.agentId ?? '',
    backends: row.backends,
    capabilities: row.capabilities,
    workspace: (row.workspace as { repo: string; ref: string } | null) ?? undefined,
    verify: encodeVerify(row.verify),
    webhooks: row.webhooks,
    cancelRequestedBy: row.cancelRequestedBy ?? '',
    createTime: row.createdAt,
    startTime: row.startedAt ?? undefined,
    finishTime: row.finishedAt ?? undefined,
    requestId: row.requestId ?? '',
    lastEventSeq: row.lastEventSeq,
    webhookDeliveries: (details.webhookDeliveries ?? []).map(encodeWebhookDelivery),
  };
}

export function encodeEvent(row: EventRow): TaskEvent {
  return {
    taskId: row.taskId,
    seq: row.seq,
    kind: row.kind,
    dataJson: JSON.stringify(row.data),
    createTime: row.createdAt,
  };
}
