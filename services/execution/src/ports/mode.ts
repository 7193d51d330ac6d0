import { Mode as ProtoMode } from '@actor/proto/placement';
import type { Mode } from '@actor/engine';

const toProto: Record<Mode, ProtoMode> = {
  cheapest: ProtoMode.MODE_CHEAPEST,
  balanced: ProtoMode.MODE_BALANCED,
  best: ProtoMode.MODE_BEST,
  fastest: ProtoMode.MODE_FASTEST,
  private: ProtoMode.MODE_PRIVATE,
};

/** The public mode names, in the order the docs list them. */
export const modes = Object.keys(toProto) as Mode[];

export function modeToProto(mode: Mode): ProtoMode {
  return toProto[mode];
}

export function isMode(value: string): value is Mode {
  return value in toProto;
}
