import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AttemptRecord, Classification, ExplanationEntry, TracePort } from '@actor/engine';

/** One line of a run's trace file: when, what kind of record, and the record's fields. */
export type TraceLine =
  | { kind: 'task'; task: unknown }
  | { kind: 'classified'; classification: Classification }
  | { kind: 'state'; state: 'running' | 'verifying' }
  | { kind: 'output'; attempt: number; text: string }
  | { kind: 'explain'; entry: ExplanationEntry }
  | { kind: 'attempt'; attempt: AttemptRecord }
  | { kind: 'end'; outcome: unknown };

/** Told about every record as it is written (the CLI's progress on stderr). */
export type TraceObserver = (line: TraceLine) => void;

/**
 * The trace of one `actor run`: every record the engine makes, one JSON object a line, appended to
 * `$ACTOR_HOME/runs/<task id>.jsonl` as it happens (a run stopped half-way leaves what it did). It
 * also keeps the explanation and the latest attempts for the command's own answer.
 */
export class FileTracePort implements TracePort {
  readonly explanations: ExplanationEntry[] = [];
  readonly attempts = new Map<string, AttemptRecord>();
  classification: Classification | undefined;
  private file: FileHandle | undefined;

  private constructor(
    readonly path: string,
    private readonly observer: TraceObserver,
  ) {}

  static async create(path: string, observer: TraceObserver = () => undefined): Promise<FileTracePort> {
    const trace = new FileTracePort(path, observer);
    await mkdir(dirname(path), { recursive: true });
    trace.file = await open(path, 'a', 0o600);
    return trace;
  }

  async write(line: TraceLine): Promise<void> {
    this.observer(line);
    if (!this.file) throw new Error(`the trace ${this.path} is closed`);
    await this.file.write(`${JSON.stringify({ at: new Date().toISOString(), ...line })}\n`);
  }

  async classified(classification: Classification): Promise<void> {
    this.classification = classification;
    await this.write({ kind: 'classified', classification });
  }

  async state(state: 'running' | 'verifying'): Promise<void> {
    await this.write({ kind: 'state', state });
  }

  async output(attempt: number, text: string): Promise<void> {
    await this.write({ kind: 'output', attempt, text });
  }

  async explain(entry: ExplanationEntry): Promise<void> {
    this.explanations.push(entry);
    await this.write({ kind: 'explain', entry });
  }

  async attempt(record: AttemptRecord): Promise<void> {
    this.attempts.set(record.id, structuredClone(record));
    await this.write({ kind: 'attempt', attempt: record });
  }

  async close(): Promise<void> {
    const file = this.file;
    this.file = undefined;
    await file?.close();
  }
}
