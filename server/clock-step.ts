/**
 * How far ahead of the clock a creation time hal0 wrote may stand before it
 * is taken for one written before the clock was set back (NTP's step,
 * `date -s`), and what it measured (an approval's wait, a session's or a login
 * link's life) is ended because its length is not known. The steps of a
 * synchronised host (a fraction of a second; a few seconds as it boots) stay
 * within it: they would otherwise expire whatever was made in the second
 * before them, and they lengthen a life by no more than this.
 */
export const CLOCK_STEP_GRACE_MS = 5 * 60_000;

/** The ISO time past which a creation time, read at `now`, was written before the clock was set back. */
export function setBackPast(now: number): string {
  return new Date(now + CLOCK_STEP_GRACE_MS).toISOString();
}
