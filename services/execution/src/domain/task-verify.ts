import { citationRequirementProblem, type CitationRequirement, type TaskVerify } from '@actor/engine';
import { CitationStyle, type Verify } from '@actor/proto/execution';

/** Most postconditions per task, and most characters per command (test command and postconditions). */
export const maxPostconditions = 16;
export const maxCommandChars = 4_000;

const styleFromProto: Partial<Record<CitationStyle, CitationRequirement['style']>> = {
  [CitationStyle.CITATION_STYLE_URL]: 'url',
  [CitationStyle.CITATION_STYLE_NUMBERED]: 'numbered',
  [CitationStyle.CITATION_STYLE_REGEX]: 'regex',
};

const styleToProto: Record<CitationRequirement['style'], CitationStyle> = {
  url: CitationStyle.CITATION_STYLE_URL,
  numbered: CitationStyle.CITATION_STYLE_NUMBERED,
  regex: CitationStyle.CITATION_STYLE_REGEX,
};

/**
 * The task's verify spec as stored (the `verify` jsonb column) and handed to the engine, from the
 * CreateTask request. Pushes a problem naming the field for each bad part. Postconditions need a
 * workspace to run in: the honest place for an action's check is a copy of the repository it acts
 * on, so a task with postconditions and no workspace is refused rather than run unchecked.
 */
export function decodeVerify(verify: Verify | undefined, hasWorkspace: boolean, problems: string[]): TaskVerify {
  const decoded: TaskVerify = { judge: verify?.judgeSet ? verify.judge : true };
  if (!verify) return decoded;
  if (verify.testCommand) {
    if (verify.testCommand.length > maxCommandChars) problems.push(`verify.test_command is longer than ${maxCommandChars} characters`);
    decoded.testCommand = verify.testCommand;
  }

  const citations = verify.citations;
  if (citations && citations.style !== CitationStyle.CITATION_STYLE_UNSPECIFIED) {
    const style = styleFromProto[citations.style];
    if (!style) {
      problems.push(`verify.citations.style ${citations.style} is not one of url, numbered, regex`);
    } else {
      const requirement: CitationRequirement = {
        style,
        min: citations.min === 0 ? 1 : citations.min,
        ...(citations.pattern ? { pattern: citations.pattern } : {}),
      };
      const problem = citationRequirementProblem(requirement);
      if (problem) problems.push(problem);
      decoded.citations = requirement;
    }
  } else if (citations && (citations.pattern || citations.min)) {
    problems.push('verify.citations needs a style (url, numbered or regex)');
  }

  if (verify.postconditions.length > 0) {
    if (verify.postconditions.length > maxPostconditions) problems.push(`verify.postconditions has more than ${maxPostconditions} commands`);
    if (verify.postconditions.some((command) => command.trim() === '' || command.length > maxCommandChars)) {
      problems.push(`each of verify.postconditions must be a command of 1 to ${maxCommandChars} characters`);
    }
    if (!hasWorkspace) {
      problems.push('verify.postconditions need a workspace: they run in a working copy of workspace.repo, and there is none to run them in');
    }
    decoded.postconditions = [...verify.postconditions];
  }

  if (verify.checkTimeoutMs !== 0) {
    if (!Number.isInteger(verify.checkTimeoutMs) || verify.checkTimeoutMs < 1) {
      problems.push('verify.check_timeout_ms must be a positive whole number of milliseconds');
    } else if (!decoded.testCommand && !decoded.postconditions) {
      problems.push('verify.check_timeout_ms limits the test command and postconditions, and the task has neither');
    } else {
      decoded.checkTimeoutMs = verify.checkTimeoutMs;
    }
  }
  return decoded;
}

/** The stored verify spec as the proto Verify. */
export function encodeVerify(verify: TaskVerify): Verify {
  return {
    judge: verify.judge,
    judgeSet: true,
    testCommand: verify.testCommand ?? '',
    citations: verify.citations
      ? { style: styleToProto[verify.citations.style], pattern: verify.citations.pattern ?? '', min: verify.citations.min }
      : undefined,
    postconditions: verify.postconditions ?? [],
    checkTimeoutMs: verify.checkTimeoutMs ?? 0,
  };
}
