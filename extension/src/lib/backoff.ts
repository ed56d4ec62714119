// Reconnect delays: full jitter, 1 s base, 30 s cap.

export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_CAP_MS = 30_000;
/** Never hammer: even a zero draw waits this long. */
export const BACKOFF_FLOOR_MS = 250;

/** The delay before reconnect attempt `attempt` (0-based). */
export function backoffDelay(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.max(BACKOFF_FLOOR_MS, Math.floor(random() * ceiling));
}
