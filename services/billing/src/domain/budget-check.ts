import { formatUsd } from '@actor/kit';

/** Money already committed against one limit, in micro-USD. */
export interface SpendCounter {
  heldMicroUsd: number;
  spentMicroUsd: number;
}

/** Everything a Reserve is judged on; the counters are read under their row locks. */
export interface BudgetCheck {
  projectId: string;
  taskId: string;
  /** The UTC day the per-day limit applies to. */
  day: string;
  amountMicroUsd: number;
  /** 0 means no per-task limit. */
  perTaskLimitMicroUsd: number;
  /** 0 means no per-day limit. */
  perDayLimitMicroUsd: number;
  task: SpendCounter;
  projectDay: SpendCounter;
}

/** True when holding `amount` more would take spent + held above `limit`; a limit of 0 is no limit. */
export function exceedsLimit(limitMicroUsd: number, counter: SpendCounter, amountMicroUsd: number): boolean {
  if (limitMicroUsd === 0) return false;
  return counter.spentMicroUsd + counter.heldMicroUsd + amountMicroUsd > limitMicroUsd;
}

/**
 * Why a reservation is refused, or undefined when it fits both limits. The message names each limit
 * that would be exceeded, its size, what is spent and held against it and the amount asked, so a
 * user reading a failed task knows which budget to raise and by how much.
 */
export function budgetRefusal(check: BudgetCheck): string | undefined {
  const reasons: string[] = [];
  if (exceedsLimit(check.perTaskLimitMicroUsd, check.task, check.amountMicroUsd)) {
    reasons.push(
      describe(`per-task budget of ${formatUsd(check.perTaskLimitMicroUsd)} for task ${check.taskId}`, check.perTaskLimitMicroUsd, check.task, check.amountMicroUsd),
    );
  }
  if (exceedsLimit(check.perDayLimitMicroUsd, check.projectDay, check.amountMicroUsd)) {
    reasons.push(
      describe(
        `per-day budget of ${formatUsd(check.perDayLimitMicroUsd)} for project ${check.projectId} on ${check.day} (UTC)`,
        check.perDayLimitMicroUsd,
        check.projectDay,
        check.amountMicroUsd,
      ),
    );
  }
  return reasons.length > 0 ? reasons.join('; ') : undefined;
}

function describe(limitText: string, limitMicroUsd: number, counter: SpendCounter, amountMicroUsd: number): string {
  const left = Math.max(0, limitMicroUsd - counter.spentMicroUsd - counter.heldMicroUsd);
  return (
    `${limitText} would be exceeded: ${formatUsd(counter.spentMicroUsd)} spent, ` +
    `${formatUsd(counter.heldMicroUsd)} held, ${formatUsd(amountMicroUsd)} asked, ${formatUsd(left)} left`
  );
}
