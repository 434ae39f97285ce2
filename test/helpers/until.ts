import { setTimeout as sleep } from "node:timers/promises";

/** `what()`'s value once `ok` holds for it, asked every 25 ms; throws with the last value after `ms`. */
export async function until<T>(what: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await what();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`not reached in ${ms} ms: ${JSON.stringify(v)}`);
    await sleep(25);
  }
}

/** Resolves once `check()` holds, asked every 20 ms; throws after `ms`. */
export async function untilTrue(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await sleep(20);
  }
}
