import { runInNewContext } from 'node:vm';
import type { CitationRequirement } from './ports.js';

/** The result of checking an answer's citations. */
export interface CitationCheck {
  passed: boolean;
  /** The distinct citations found (at most `shownCitations` of them), in order of appearance. */
  found: string[];
  /** How many distinct citations there are in all. */
  count: number;
  /** One line for the verdict's `checks` and the explanation. */
  summary: string;
}

/** How long a task author's `regex` may run over one answer before the check fails, in ms. */
export const citationRegexTimeoutMs = 1_000;
/** The longest `regex` pattern accepted (the execution service refuses longer ones at creation). */
export const maxCitationPatternLength = 500;
const shownCitations = 20;

/** Why a requirement cannot be checked, or undefined when it can (a task's creation-time check). */
export function citationRequirementProblem(requirement: CitationRequirement): string | undefined {
  if (!Number.isInteger(requirement.min) || requirement.min < 1 || requirement.min > 1_000) {
    return 'verify.citations.min must be a whole number from 1 to 1000';
  }
  if (requirement.style === 'regex') {
    if (!requirement.pattern) return 'verify.citations.pattern is required for style regex';
    if (requirement.pattern.length > maxCitationPatternLength) {
      return `verify.citations.pattern is longer than ${maxCitationPatternLength} characters`;
    }
    try {
      new RegExp(requirement.pattern, 'gm');
    } catch (error) {
      return `verify.citations.pattern is not a regular expression: ${error instanceof Error ? error.message : String(error)}`;
    }
  } else if (requirement.pattern) {
    return `verify.citations.pattern is only for style regex, not ${requirement.style}`;
  }
  return undefined;
}

const urlPattern = /\bhttps?:\/\/[^\s<>"'`)\]]+/g;

function distinct(values: string[]): string[] {
  return [...new Set(values)];
}

function urls(answer: string): string[] {
  // A URL at the end of a sentence does not own the period or comma after it.
  return distinct((answer.match(urlPattern) ?? []).map((url) => url.replace(/[.,;:!?]+$/, '')));
}

/** Markers `[n]` used in the text, and those that have an entry (a line starting with `[n]`). */
function numbered(answer: string): { cited: string[]; dangling: string[] } {
  const entries = new Set<string>();
  const used: string[] = [];
  for (const line of answer.split('\n')) {
    const entry = /^\s*\[(\d{1,4})\]\s*\S/.exec(line);
    if (entry) entries.add(entry[1]!);
    // Markers in the text: every `[n]` except a line's own entry marker.
    const text = entry ? line.slice(entry[0].length - 1) : line;
    for (const marker of text.matchAll(/\[(\d{1,4})\]/g)) used.push(marker[1]!);
  }
  const markers = distinct(used);
  return {
    cited: markers.filter((marker) => entries.has(marker)).map((marker) => `[${marker}]`),
    dangling: markers.filter((marker) => !entries.has(marker)).map((marker) => `[${marker}]`),
  };
}

/**
 * Runs the author's pattern in a separate context with a time limit: a pattern that backtracks
 * without end must fail the check, not hang the process that runs every task.
 */
function regexMatches(answer: string, pattern: string): string[] | { error: string } {
  try {
    const json = runInNewContext(
      `(() => {
        const found = [];
        const expression = new RegExp(pattern, 'gm');
        for (const match of answer.matchAll(expression)) {
          if (match[0] !== '') found.push(match[0]);
        }
        return JSON.stringify(found);
      })()`,
      { answer, pattern },
      { timeout: citationRegexTimeoutMs },
    ) as string;
    return distinct(JSON.parse(json) as string[]);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { error: /timed out/i.test(message) ? `the pattern ran longer than ${citationRegexTimeoutMs} ms` : message };
  }
}

function describe(requirement: CitationRequirement): string {
  const many = requirement.min !== 1;
  const what =
    requirement.style === 'url'
      ? `distinct URL${many ? 's' : ''}`
      : requirement.style === 'numbered'
        ? `numbered citation${many ? 's' : ''} [n] with ${many ? 'their entries' : 'its entry'}`
        : `distinct match${many ? 'es' : ''} of /${requirement.pattern}/`;
  return `at least ${requirement.min} ${what}`;
}

/** Checks that `answer` carries the citations `requirement` asks for. */
export function checkCitations(answer: string, requirement: CitationRequirement): CitationCheck {
  const asked = describe(requirement);
  let found: string[];
  let problem: string | undefined;
  if (requirement.style === 'url') {
    found = urls(answer);
  } else if (requirement.style === 'numbered') {
    const markers = numbered(answer);
    found = markers.cited;
    if (markers.dangling.length > 0) problem = `marker${markers.dangling.length === 1 ? '' : 's'} ${markers.dangling.join(', ')} without an entry`;
  } else {
    const matches = regexMatches(answer, requirement.pattern ?? '');
    if (Array.isArray(matches)) found = matches;
    else {
      found = [];
      problem = `the pattern could not be checked (${matches.error})`;
    }
  }
  const passed = problem === undefined && found.length >= requirement.min;
  const counted = `${found.length} found`;
  const summary = passed
    ? `citations (${asked}) passed: ${counted}`
    : `citations (${asked}) failed: ${counted}${problem ? `, ${problem}` : ''}`;
  return { passed, found: found.slice(0, shownCitations), count: found.length, summary };
}
