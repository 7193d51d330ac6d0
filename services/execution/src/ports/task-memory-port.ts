import { and, desc, eq, inArray, ne, sql } from 'drizzle-orm';
import { formatUsd, type MemoryPort, type RecallContext } from '@actor/engine';
import type { Database } from '@actor/kit';
import { attempts, tasks, type schema } from '../db/schema.js';

export interface TaskMemoryOptions {
  /** How many earlier tasks are recalled at most; default 5. */
  limit?: number;
  /** How many of the project's most recent finished tasks are looked through for ones of the class; default 50. */
  window?: number;
}

/** Characters kept of an earlier task's text and of its result or error. */
const taskCharacters = 100;
const outcomeCharacters = 140;

function short(text: string, characters: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= characters ? line : `${line.slice(0, characters - 1)}…`;
}

/**
 * The execution service's memory: the project's recent finished tasks of the same class, from its own
 * `tasks` table, as one short outcome line each (what was asked, how it ended, on which backend, what
 * it cost, the start of the result or the error). A task's own row is never recalled, nor another
 * project's. The engine puts these lines in the prompt as context, not instructions.
 */
export class TaskMemoryPort implements MemoryPort {
  private readonly limit: number;
  private readonly window: number;

  constructor(
    private readonly db: Database<typeof schema>,
    options: TaskMemoryOptions = {},
  ) {
    this.limit = options.limit ?? 5;
    this.window = options.window ?? 50;
  }

  async recall(projectId: string, _input: string, context?: RecallContext): Promise<string[]> {
    const rows = await this.db
      .select({
        id: tasks.id,
        state: tasks.state,
        input: tasks.input,
        result: tasks.result,
        errorCode: tasks.errorCode,
        errorMessage: tasks.errorMessage,
        costMicroUsd: tasks.costMicroUsd,
        classification: tasks.classification,
        // Spelled out: inside a subquery drizzle would name the columns without their tables.
        passedOn: sql<string | null>`(select passed.backend from ${attempts} as passed where passed.task_id = "tasks"."id" and passed.state = 'passed' order by passed.number desc limit 1)`,
      })
      .from(tasks)
      .where(
        and(
          eq(tasks.projectId, projectId),
          inArray(tasks.state, ['succeeded', 'failed']),
          context ? ne(tasks.id, context.taskId) : undefined,
        ),
      )
      // The project's index orders by creation; a finished task is recalled by when it was asked.
      .orderBy(desc(tasks.createdAt))
      .limit(this.window);

    return rows
      .filter((row) => !context || (row.classification as { taskClass?: string } | null)?.taskClass === context.taskClass)
      .slice(0, this.limit)
      .map((row) => {
        const asked = `"${short(row.input, taskCharacters)}"`;
        if (row.state === 'succeeded') {
          const where = row.passedOn ? ` on ${row.passedOn}` : '';
          return `${row.id} ${asked} succeeded${where} for ${formatUsd(row.costMicroUsd)}: ${short(row.result ?? '', outcomeCharacters)}`;
        }
        return `${row.id} ${asked} failed (${row.errorCode ?? 'unknown'}) after ${formatUsd(row.costMicroUsd)}: ${short(row.errorMessage ?? '', outcomeCharacters)}`;
      });
  }
}
