import { describe, expect, it } from 'vitest';
import { checkCitations, citationRequirementProblem } from './citation-check.js';

describe('checkCitations', () => {
  it('url: counts distinct URLs, without the punctuation that ends a sentence', () => {
    const answer = 'See https://example.org/a. Also (https://example.org/b), and https://example.org/a again.';
    const check = checkCitations(answer, { style: 'url', min: 2 });
    expect(check).toMatchObject({ passed: true, count: 2, found: ['https://example.org/a', 'https://example.org/b'] });
    expect(check.summary).toBe('citations (at least 2 distinct URLs) passed: 2 found');
    expect(checkCitations(answer, { style: 'url', min: 3 })).toMatchObject({ passed: false, count: 2 });
    expect(checkCitations('No sources at all.', { style: 'url', min: 1 }).summary).toBe(
      'citations (at least 1 distinct URL) failed: 0 found',
    );
  });

  it('numbered: a marker counts only with its entry, and a marker without one fails the check', () => {
    const good = 'Water boils at 100 C [1] at sea level [2].\n\n[1] Physics handbook, p. 3\n[2] https://example.org/boiling';
    expect(checkCitations(good, { style: 'numbered', min: 2 })).toMatchObject({ passed: true, found: ['[1]', '[2]'] });

    const dangling = 'Claim [1] and claim [3].\n\n[1] A source';
    const check = checkCitations(dangling, { style: 'numbered', min: 1 });
    expect(check.passed).toBe(false);
    expect(check.summary).toContain('marker [3] without an entry');

    // Entries alone, never cited in the text, are no citations.
    expect(checkCitations('Plain text.\n[1] A source', { style: 'numbered', min: 1 }).passed).toBe(false);
  });

  it('regex: counts distinct matches of the author pattern', () => {
    const answer = 'As shown in RFC 9110 and RFC 9457, and again RFC 9110.';
    expect(checkCitations(answer, { style: 'regex', pattern: 'RFC \\d+', min: 2 })).toMatchObject({
      passed: true,
      found: ['RFC 9110', 'RFC 9457'],
    });
    expect(checkCitations(answer, { style: 'regex', pattern: 'RFC \\d+', min: 3 }).passed).toBe(false);
  });

  it('regex: a pattern that backtracks without end fails the check instead of hanging', () => {
    const check = checkCitations(`${'a'.repeat(40)}!`, { style: 'regex', pattern: '^(a+)+$', min: 1 });
    expect(check.passed).toBe(false);
    expect(check.summary).toContain('the pattern could not be checked (the pattern ran longer than 1000 ms)');
  });
});

describe('citationRequirementProblem', () => {
  it('names what is wrong with a requirement, and nothing for a good one', () => {
    expect(citationRequirementProblem({ style: 'url', min: 1 })).toBeUndefined();
    expect(citationRequirementProblem({ style: 'regex', pattern: '\\[\\d+\\]', min: 2 })).toBeUndefined();
    expect(citationRequirementProblem({ style: 'url', min: 0 })).toMatch(/min must be a whole number/);
    expect(citationRequirementProblem({ style: 'regex', min: 1 })).toMatch(/pattern is required/);
    expect(citationRequirementProblem({ style: 'regex', pattern: '(', min: 1 })).toMatch(/not a regular expression/);
    expect(citationRequirementProblem({ style: 'url', pattern: 'x', min: 1 })).toMatch(/only for style regex/);
  });
});
