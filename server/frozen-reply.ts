/**
 * Replies made once and served many times. A reply marked frozen is never
 * changed after it was made: its maker builds a new object when what it
 * says moves (the roster: a new model, a new liveness observation, a slot
 * id given). What the doors derive from it — the redacted copy, its JSON —
 * is therefore derived once per reply object, not once per request.
 */
const frozen = new WeakSet<object>();
const texts = new WeakMap<object, string>();

/** Marks `reply` (and returns it): it must not be changed from here on. */
export function freezeReply<T extends object>(reply: T): T {
  frozen.add(reply);
  return reply;
}

export function isFrozenReply(value: unknown): value is object {
  return typeof value === "object" && value !== null && frozen.has(value);
}

/**
 * `derive(reply)`, made once per frozen reply and kept beside it in `memo`
 * (itself frozen: what is derived from an unchanging reply does not change).
 */
export function derivedOnce<T extends object>(memo: WeakMap<object, T>, reply: object, derive: (reply: object) => T): T {
  let out = memo.get(reply);
  if (out === undefined) {
    out = freezeReply(derive(reply));
    memo.set(reply, out);
  }
  return out;
}

/** `JSON.stringify(value)`; a frozen reply's text is made once. */
export function jsonOf(value: unknown): string {
  if (!isFrozenReply(value)) return JSON.stringify(value);
  let text = texts.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    texts.set(value, text);
  }
  return text;
}
