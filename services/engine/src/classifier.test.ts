import { describe, expect, it } from 'vitest';
import { classifyTask } from './classifier.js';
import type { EngineTask } from './ports.js';

function task(input: string, extra: Partial<EngineTask> = {}): EngineTask {
  return {
    id: 'tsk_1',
    projectId: 'prj_1',
    input,
    mode: 'balanced',
    budget: { perTaskMicroUsd: 1_000_000, perDayMicroUsd: 10_000_000 },
    backends: [],
    capabilities: [],
    attachmentMediaTypes: [],
    verify: { judge: true },
    ...extra,
  };
}

describe('classifyTask', () => {
  it('recognises code from a code block and programming words', () => {
    const result = classifyTask(task('Fix the bug in this function:\n```ts\nconst total = items.reduce((a, b) => a + b);\n```'));
    expect(result.taskClass).toBe('code');
    expect(result.reason).toMatch(/^Classified as code because the task has a code block/);
    expect(result.reason).toContain('"bug"');
  });

  it('recognises code from words alone', () => {
    expect(classifyTask(task('Refactor the TypeScript module so the tests compile again')).taskClass).toBe('code');
  });

  it('recognises research', () => {
    const result = classifyTask(task('Compare the literature on intermittent fasting and summarize it, citing sources.'));
    expect(result.taskClass).toBe('research');
    expect(result.reason).toContain('"literature"');
  });

  it('recognises actions', () => {
    expect(classifyTask(task('Send an email to Dana and schedule a meeting for Tuesday')).taskClass).toBe('action');
    expect(classifyTask(task('Create a ticket for the outage')).taskClass).toBe('action');
  });

  it('falls back to general and says why', () => {
    const result = classifyTask(task('Write a haiku about autumn leaves'));
    expect(result.taskClass).toBe('general');
    expect(result.reason).toContain('no signs of code, research or an action');
  });

  it('does not read code into words that merely contain a signal', () => {
    expect(classifyTask(task('Tell me about the testament of a buggy whip maker')).taskClass).toBe('general');
  });

  it('needs vision for image attachments only', () => {
    expect(classifyTask(task('What is in this picture?', { attachmentMediaTypes: ['image/png'] })).vision).toBe(true);
    const withPdf = classifyTask(task('Summarize this document', { attachmentMediaTypes: ['application/pdf'] }));
    expect(withPdf.vision).toBe(false);
    expect(withPdf.reason).toContain('No images');
    expect(classifyTask(task('Describe it', { attachmentMediaTypes: ['IMAGE/JPEG'] })).reason).toContain('an image attachment (IMAGE/JPEG)');
  });

  it('rates difficulty from length and signal words', () => {
    expect(classifyTask(task('Give me a quick one sentence summary of TCP')).difficulty).toBe(1);
    expect(classifyTask(task('Design the architecture of a distributed cache with a thorough security review')).difficulty).toBe(3);
    const long = classifyTask(task('Explain how this works. '.repeat(30)));
    expect(long.difficulty).toBe(2);
    expect(long.reason).toContain(`${'Explain how this works. '.repeat(30).length} characters`);
    expect(classifyTask(task('word '.repeat(500))).difficulty).toBe(3);
  });

  it('writes the reason as full sentences', () => {
    const reason = classifyTask(task('Deploy the new release to staging')).reason;
    expect(reason).toMatch(/^[A-Z].*\.$/);
    expect(reason).toMatch(/Difficulty [123] of 3/);
  });
});
