/** The longest delay a node timer takes (2^31 - 1 ms, about 24.8 days): a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/**
 * A duration given in seconds by an environment variable (HAL0_HUB_TIMEOUT_S,
 * HAL0_HUB_STALL_S, HAL0_IMAGE_STALL_S), in ms: `fallbackMs` when it is not a
 * number above 0, and at most MAX_TIMER_MS, since node runs a longer timer
 * after 1 ms (a large value meant "no limit" gave every call up at once).
 */
export function envSecondsMs(value: string | undefined, fallbackMs: number): number {
  const s = Number(value);
  return Number.isFinite(s) && s > 0 ? Math.min(s * 1000, MAX_TIMER_MS) : fallbackMs;
}
