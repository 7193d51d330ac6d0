/** The line every "bad" demo answer carries; the demo judge fails answers that contain it. */
export const demoFlawMarker = '[demo flaw: this draft ignores part of the task]';

/** Who is answering, as the answer names it. */
export interface DemoAnswerAuthor {
  type: string;
  displayName: string;
  modelFamily: string;
  qualityTier: number;
}

const longestRestatement = 240;

/** The task in one line, cut to a readable length. */
export function restateTask(prompt: string): string {
  const oneLine = prompt.replace(/\s+/g, ' ').trim();
  if (oneLine.length === 0) return '(an empty task)';
  const characters = Array.from(oneLine);
  return characters.length <= longestRestatement
    ? oneLine
    : `${characters.slice(0, longestRestatement - 1).join('')}…`;
}

/**
 * A plausible answer that says plainly it is simulated and restates the task. A bad answer carries
 * the flaw marker on its own line, so a reader and the demo judge both see why it should fail.
 */
export function composeDemoAnswer(author: DemoAnswerAuthor, prompt: string, good: boolean): string {
  const steps = [
    'Break the task into its parts and note every constraint it states.',
    'Work through the parts in order, checking each intermediate result against the task.',
    'Summarise the outcome and list what a reviewer should verify.',
  ];
  if (author.qualityTier >= 3) steps.splice(2, 0, 'Revisit edge cases and assumptions before concluding.');
  const lines = [
    `This is a simulated demo answer from ${author.displayName} (${author.type}, family ${author.modelFamily}); no real model was called.`,
    '',
    `Task, restated: "${restateTask(prompt)}"`,
    '',
    'Approach:',
    ...steps.map((step, index) => `${index + 1}. ${step}`),
    '',
  ];
  if (good) {
    lines.push('Result: every part of the task is addressed above, in order, with the checks a reviewer needs.');
  } else {
    lines.push(demoFlawMarker, 'Result: only the first part of the task is addressed; the rest was skipped.');
  }
  return lines.join('\n');
}

/** Splits text into `count` pieces of near-equal length (fewer when the text is shorter). */
export function splitIntoChunks(text: string, count: number): string[] {
  const characters = Array.from(text);
  const pieces = Math.max(1, Math.min(count, characters.length));
  const size = Math.ceil(characters.length / pieces);
  const chunks: string[] = [];
  for (let start = 0; start < characters.length; start += size) {
    chunks.push(characters.slice(start, start + size).join(''));
  }
  return chunks.length > 0 ? chunks : [''];
}
