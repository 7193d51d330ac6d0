import { describe, expect, it } from 'vitest';
import { CitationStyle, type Verify } from '@actor/proto/execution';
import { decodeVerify, encodeVerify } from './task-verify.js';

function verify(extra: Partial<Verify>): Verify {
  return { testCommand: '', judge: true, judgeSet: false, citations: undefined, postconditions: [], checkTimeoutMs: 0, ...extra };
}

describe('decodeVerify', () => {
  it('stores what the request asks and gives it back as the proto', () => {
    const problems: string[] = [];
    const decoded = decodeVerify(
      verify({
        citations: { style: CitationStyle.CITATION_STYLE_NUMBERED, pattern: '', min: 0 },
        postconditions: ['test -f sent'],
        checkTimeoutMs: 5_000,
      }),
      true,
      problems,
    );
    expect(problems).toEqual([]);
    expect(decoded).toEqual({ judge: true, citations: { style: 'numbered', min: 1 }, postconditions: ['test -f sent'], checkTimeoutMs: 5_000 });
    expect(encodeVerify(decoded)).toEqual({
      judge: true,
      judgeSet: true,
      testCommand: '',
      citations: { style: CitationStyle.CITATION_STYLE_NUMBERED, pattern: '', min: 1 },
      postconditions: ['test -f sent'],
      checkTimeoutMs: 5_000,
    });
  });

  it('names each bad part, and refuses postconditions without a workspace', () => {
    const problems: string[] = [];
    decodeVerify(
      verify({
        citations: { style: CitationStyle.CITATION_STYLE_REGEX, pattern: '(', min: 1 },
        postconditions: ['true', ' '],
        checkTimeoutMs: -1,
      }),
      false,
      problems,
    );
    expect(problems).toEqual([
      expect.stringMatching(/^verify\.citations\.pattern is not a regular expression/),
      'each of verify.postconditions must be a command of 1 to 4000 characters',
      'verify.postconditions need a workspace: they run in a working copy of workspace.repo, and there is none to run them in',
      'verify.check_timeout_ms must be a positive whole number of milliseconds',
    ]);
    const timeoutAlone: string[] = [];
    decodeVerify(verify({ checkTimeoutMs: 1_000 }), true, timeoutAlone);
    expect(timeoutAlone).toEqual(['verify.check_timeout_ms limits the test command and postconditions, and the task has neither']);
  });
});
