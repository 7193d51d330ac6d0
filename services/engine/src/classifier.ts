import type { Classification, EngineTask, TaskClass } from './ports.js';

/**
 * The fast local classifier: regular expressions over the task text, no model call. It only has to be
 * good enough to steer placement; a wrong class costs an escalation, not a wrong answer, because every
 * answer is still verified.
 */

interface Signal {
  /** The word or phrase shown in the reason. */
  label: string;
  pattern: RegExp;
  weight: number;
  /** Whether the label is a literal word of the task (quoted in the reason) or a description. */
  literal: boolean;
}

function words(labels: string[], weight = 1): Signal[] {
  return labels.map((label) => ({
    label,
    // Whole words, with the usual English endings (test, tests, testing, tested).
    pattern: new RegExp(`\\b${label.replace(/ /g, '\\s+')}(?:s|es|ed|d|ing)?\\b`, 'i'),
    weight,
    literal: true,
  }));
}

const classSignals: Record<Exclude<TaskClass, 'general'>, Signal[]> = {
  code: [
    { label: 'a code block', pattern: /```|^(?: {4}|\t)\S.*[;{}]\s*$/m, weight: 3, literal: false },
    { label: 'code syntax', pattern: /\b(?:function\s+\w+\s*\(|def\s+\w+\s*\(|class\s+\w+\s*[({:]|const\s+\w+\s*=|import\s+[\w{*].*\bfrom\b)|=>|\w+\(\)/, weight: 2, literal: false },
    ...words(['typescript', 'javascript', 'python', 'rust', 'golang', 'java', 'kotlin', 'sql'], 2),
    ...words(['stack trace', 'unit test', 'pull request', 'type error', 'null pointer', 'segfault'], 2),
    ...words([
      'function', 'method', 'bug', 'refactor', 'test', 'compile', 'compiler', 'debug', 'code', 'script',
      'repository', 'repo', 'lint', 'regex', 'endpoint', 'api', 'exception', 'variable', 'implement', 'commit',
      'npm', 'git', 'syntax', 'build', 'crash', 'library', 'module', 'class',
    ]),
  ],
  research: [
    ...words(['literature', 'sources', 'cite', 'citation', 'references', 'peer reviewed', 'papers', 'studies'], 2),
    ...words([
      'research', 'find', 'compare', 'comparison', 'summarize', 'summarise', 'summary', 'survey', 'evidence',
      'investigate', 'look up', 'what is known', 'overview', 'history of', 'pros and cons', 'trends', 'report on',
    ]),
  ],
  action: [
    ...words(['create a ticket', 'open a ticket', 'file an issue', 'send an email', 'book a', 'schedule a'], 2),
    ...words([
      'send', 'deploy', 'book', 'schedule', 'reserve', 'publish', 'notify', 'remind', 'invite',
      'email', 'ticket', 'calendar', 'meeting', 'pay', 'purchase', 'buy', 'transfer', 'submit', 'restart',
      'roll back', 'rollback', 'provision', 'cancel my',
    ]),
  ],
};

/** Ties go to the class whose work is the most particular to check. */
const classPriority: Array<Exclude<TaskClass, 'general'>> = ['code', 'action', 'research'];

const hardSignals = words([
  'complex', 'entire', 'architecture', 'design', 'optimize', 'optimise', 'concurrency', 'concurrent',
  'distributed', 'prove', 'proof', 'thorough', 'comprehensive', 'in depth', 'in-depth', 'multi-step', 'migrate',
  'migration', 'security', 'performance', 'scalable', 'race condition', 'end to end', 'production',
]);
const easySignals = words(['simple', 'quick', 'quickly', 'briefly', 'one sentence', 'short', 'trivial', 'one line', 'one word']);

/** Characters past which a task counts as long, and as very long. */
const longTaskCharacters = 400;
const veryLongTaskCharacters = 2_000;

function matches(signals: Signal[], text: string): Signal[] {
  return signals.filter((signal) => signal.pattern.test(text));
}

function joinWords(parts: string[]): string {
  if (parts.length <= 1) return parts.join('');
  return `${parts.slice(0, -1).join(', ')} and ${parts[parts.length - 1]}`;
}

function quoted(signals: Signal[]): string {
  return joinWords(signals.map((signal) => `"${signal.label}"`));
}

/** "has a code block and mentions "bug" and "function"" */
function evidence(signals: Signal[]): string {
  const described = signals.filter((signal) => !signal.literal).map((signal) => signal.label);
  const literal = signals.filter((signal) => signal.literal);
  const parts: string[] = [];
  if (described.length > 0) parts.push(`has ${joinWords(described)}`);
  if (literal.length > 0) parts.push(`mentions ${quoted(literal)}`);
  return parts.join(' and ');
}

/** Classifies a task: class, vision, difficulty tier and the reason, in words. */
export function classifyTask(task: EngineTask): Classification {
  const text = task.input;

  let taskClass: TaskClass = 'general';
  let best: Signal[] = [];
  let bestScore = 0;
  for (const candidate of classPriority) {
    const found = matches(classSignals[candidate], text);
    const score = found.reduce((sum, signal) => sum + signal.weight, 0);
    if (score > bestScore) {
      taskClass = candidate;
      best = found;
      bestScore = score;
    }
  }

  const imageTypes = task.attachmentMediaTypes.filter((type) => type.trim().toLowerCase().startsWith('image/'));
  const visionAsked = task.capabilities.some((capability) => capability.toLowerCase() === 'vision');
  const vision = imageTypes.length > 0 || visionAsked;

  const hard = matches(hardSignals, text);
  const easy = matches(easySignals, text);
  let points = 0;
  if (text.length > veryLongTaskCharacters) points += 2;
  else if (text.length > longTaskCharacters) points += 1;
  if (hard.length >= 3) points += 2;
  else if (hard.length >= 1) points += 1;
  if (easy.length > 0) points -= 1;
  const difficulty = Math.min(3, Math.max(1, 1 + points));

  const classReason =
    taskClass === 'general'
      ? 'Classified as general: no signs of code, research or an action were found.'
      : `Classified as ${taskClass} because the task ${evidence(best)}.`;
  const difficultyParts = [`${text.length} characters`];
  if (hard.length > 0) difficultyParts.push(`hard signals ${quoted(hard)}`);
  if (easy.length > 0) difficultyParts.push(`easy signals ${quoted(easy)}`);
  const difficultyReason = `Difficulty ${difficulty} of 3 (${difficultyParts.join('; ')}).`;
  let visionReason = 'No images, so vision is not needed.';
  if (imageTypes.length > 0) visionReason = `It needs vision: it carries ${imageTypes.length === 1 ? 'an image attachment' : `${imageTypes.length} image attachments`} (${imageTypes.join(', ')}).`;
  else if (visionAsked) visionReason = 'It needs vision: the task asks for it.';

  return { taskClass, vision, difficulty, reason: `${classReason} ${difficultyReason} ${visionReason}`, source: 'local' };
}
