import { describe, expect, it } from 'vitest';
import { budgetRefusal, exceedsLimit } from './budget-check.js';

const empty = { heldMicroUsd: 0, spentMicroUsd: 0 };

function check(overrides: Partial<Parameters<typeof budgetRefusal>[0]>) {
  return budgetRefusal({
    projectId: 'prj_a',
    taskId: 'tsk_a',
    day: '2025-03-01',
    amountMicroUsd: 1_000_000,
    perTaskLimitMicroUsd: 0,
    perDayLimitMicroUsd: 0,
    task: empty,
    projectDay: empty,
    ...overrides,
  });
}

describe('exceedsLimit', () => {
  it('admits up to the limit exactly, and refuses one micro-dollar more', () => {
    const counter = { heldMicroUsd: 1_500_000, spentMicroUsd: 2_500_000 };
    expect(exceedsLimit(5_000_000, counter, 1_000_000)).toBe(false);
    expect(exceedsLimit(5_000_000, counter, 1_000_001)).toBe(true);
  });

  it('counts held money as well as spent money', () => {
    expect(exceedsLimit(1_000_000, { heldMicroUsd: 900_000, spentMicroUsd: 0 }, 200_000)).toBe(true);
    expect(exceedsLimit(1_000_000, { heldMicroUsd: 0, spentMicroUsd: 900_000 }, 200_000)).toBe(true);
  });

  it('treats a limit of 0 as no limit', () => {
    expect(exceedsLimit(0, { heldMicroUsd: 10 ** 12, spentMicroUsd: 10 ** 12 }, 10 ** 12)).toBe(false);
  });
});

describe('budgetRefusal', () => {
  it('admits what fits both limits', () => {
    expect(check({ perTaskLimitMicroUsd: 1_000_000, perDayLimitMicroUsd: 1_000_000 })).toBeUndefined();
  });

  it('names the per-task limit, what is spent and held, and the amount asked, in dollars', () => {
    const message = check({
      perTaskLimitMicroUsd: 1_000_000,
      amountMicroUsd: 300_000,
      task: { spentMicroUsd: 400_000, heldMicroUsd: 500_000 },
    });
    expect(message).toBe(
      'per-task budget of $1.00 for task tsk_a would be exceeded: $0.40 spent, $0.50 held, $0.30 asked, $0.10 left',
    );
  });

  it('names the per-day limit with its project and UTC day', () => {
    const message = check({
      perDayLimitMicroUsd: 5_000_000,
      amountMicroUsd: 2_000_000,
      projectDay: { spentMicroUsd: 4_000_000, heldMicroUsd: 0 },
    });
    expect(message).toBe(
      'per-day budget of $5.00 for project prj_a on 2025-03-01 (UTC) would be exceeded: $4.00 spent, $0.00 held, $2.00 asked, $1.00 left',
    );
  });

  it('names both limits when both would be exceeded', () => {
    const message = check({
      perTaskLimitMicroUsd: 100,
      perDayLimitMicroUsd: 100,
      amountMicroUsd: 101,
    });
    expect(message).toContain('per-task budget');
    expect(message).toContain('per-day budget');
  });
});
