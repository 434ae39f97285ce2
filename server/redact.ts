/**
 * Secret redaction for logs, audit rows and log tails: values under keys
 * that name a secret, bearer tokens and `KEY=value` pairs whose key does.
 */
const SECRET_KEY = /(secret|token|password|passwd|api[_-]?key|authorization|auth_value|credential|private[_-]?key|cookie)/i;
const MASK = "[redacted]";

export function redact(value: unknown, depth = 0): unknown {
  if (depth > 8) return value;
  if (typeof value === "string") return redactText(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) && v !== null && typeof v !== "object" ? MASK : redact(v, depth + 1)]));
  }
  return value;
}

/** A line of text with bearer tokens, `secret-ish=value` pairs and `sk-…` keys masked. */
export function redactText(text: string): string {
  return text
    .replace(/(bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, `$1${MASK}`)
    .replace(/\b([A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD|API_KEY|APIKEY)[A-Za-z0-9_]*)=("[^"]*"|\S+)/gi, `$1=${MASK}`)
    .replace(/\b(sk|hf|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{12,}\b/g, MASK);
}
