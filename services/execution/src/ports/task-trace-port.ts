import type { AttemptRecord, Classification, ExplanationEntry, TracePort } from '@actor/engine';
import type { TaskRepository } from '../db/task-repository.js';
import type { TaskEventHub } from '../task-event-hub.js';

/**
 * The engine's trace, stored in the task's own rows: state and output events (gapless seqs),
 * attempts and explanation entries. A resumed task continues its attempt numbers after
 * `attemptOffset`, so numbers stay gapless across a crash.
 */
export class TaskTracePort implements TracePort {
  constructor(
    private readonly repository: TaskRepository,
    private readonly hub: TaskEventHub,
    private readonly taskId: string,
    private readonly attemptOffset: number,
  ) {}

  async classified(classification: Classification): Promise<void> {
    await this.repository.setClassification(this.taskId, classification);
  }

  async state(state: 'running' | 'verifying'): Promise<void> {
    await this.repository.setState(this.taskId, state);
    this.hub.publish(this.taskId);
  }

  async output(attempt: number, text: string): Promise<void> {
    await this.repository.appendEvent(this.taskId, 'output', { attempt: attempt + this.attemptOffset, text });
    this.hub.publish(this.taskId);
  }

  async explain(entry: ExplanationEntry): Promise<void> {
    await this.repository.appendExplanation({
      taskId: this.taskId,
      step: entry.step,
      attempt: entry.attempt === 0 ? 0 : entry.attempt + this.attemptOffset,
      message: entry.message,
      backend: entry.backend ?? null,
      decisionId: entry.decisionId ?? null,
      detail: entry.detail ?? null,
    });
  }

  async attempt(record: AttemptRecord): Promise<void> {
    const finished = !['running', 'verifying'].includes(record.state);
    await this.repository.upsertAttempt({
      id: record.id,
      taskId: this.taskId,
      number: record.number + this.attemptOffset,
      backend: record.backend,
      modelFamily: record.modelFamily,
      agentId: record.agentId ?? null,
      decisionId: record.decisionId,
      state: record.state,
      output: record.output,
      error: record.error ?? null,
      costMicroUsd: record.costMicroUsd,
      inputTokens: record.inputTokens,
      outputTokens: record.outputTokens,
      latencyMs: Math.round(record.latencyMs),
      verdict: record.verdict ?? null,
      finishedAt: finished ? new Date() : null,
    });
  }
}
