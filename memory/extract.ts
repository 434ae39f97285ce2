import { createHash } from "node:crypto";

/**
 * Pure text helpers of the embedded memory engine: how a document splits
 * into facts, when two facts are the same, how a query becomes an FTS5
 * expression, and what a text costs in tokens. No language model: every
 * rule here is cheap, deterministic and documented.
 */

/** Query words beyond this many are ignored (an FTS5 OR of thousands of terms would only be slow). */
export const MAX_QUERY_TERMS = 64;

/**
 * Splits a document into sentences: a sentence ends at `.`, `!`, `?` or `…`
 * followed by whitespace (or the end), and at every line break. Each is
 * trimmed; empty ones and ones without a letter or digit are dropped.
 * ("3.5" and "llama-server.log" do not split: no whitespace follows the dot.)
 */
export function splitSentences(text: string): string[] {
  return text
    .split(/\r?\n|\r|(?<=[.!?…])\s+/u)
    .map((s) => s.trim())
    .filter((s) => /[\p{L}\p{N}]/u.test(s));
}

/**
 * Which rule `normalise` follows. Stored normal forms computed by an earlier
 * rule are recomputed when the database is opened (embedded-db.ts).
 */
export const NORM_RULE = 2;

/** Symbols that change what a fact means ("> 90" is not "< 90", "C++" is not "C#"): kept, each its own word. */
const MEANINGFUL = String.raw`\p{Sm}\p{Sc}\p{So}^#%&@*/\\`;
const NORM_PARTS = new RegExp(String.raw`([${MEANINGFUL}]|-(?=\p{N}))|(?:(?!-\p{N})[^\p{L}\p{N}${MEANINGFUL}])+`, "gu");

/**
 * The form two facts are compared in for deduplication: Unicode-decomposed,
 * diacritics dropped, lower case; symbols that change the meaning (math and
 * currency signs, `# % & @ * / \ ^`, a minus before a digit) kept, each one
 * word; every other run of non-letters/digits one space; trimmed ("The NPU
 * slot is pinned." = "the npu slot is pinned"; "temp > 90" = "temp >90", but
 * not "temp < 90"). A text with no letter, digit or such symbol is its own
 * trimmed self.
 */
export function normalise(text: string): string {
  const norm = text
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(NORM_PARTS, (_run, symbol: string | undefined) => (symbol === undefined ? " " : ` ${symbol} `))
    .replace(/ {2,}/g, " ")
    .trim();
  return norm === "" ? text.trim() : norm;
}

/**
 * The distinct words of a free-text query: runs of letters, digits and
 * combining marks, case-folded, at most MAX_QUERY_TERMS. None = a query that
 * matches nothing.
 */
export function queryWords(query: string): string[] {
  return [...new Set((query.match(/[\p{L}\p{N}\p{M}]+/gu) ?? []).map((w) => w.toLowerCase()))].slice(0, MAX_QUERY_TERMS);
}

/**
 * An FTS5 MATCH expression over query words: each one quoted (so punctuation
 * and FTS5 syntax in a query are never operators), joined with OR (rows with
 * any word) or AND (rows with every word).
 */
export function ftsExpression(words: readonly string[], op: "OR" | "AND"): string {
  return words.map((w) => `"${w}"`).join(` ${op} `);
}

/** Estimated tokens of a text: one per four characters, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * Entities named in a text, cheaply: words of two or more characters that
 * start with a capital and are not the first word of their sentence
 * ("runs Qwen3 on the Box" → Qwen3, Box), plus words with a capital after
 * their first character anywhere (NPU, iPhone). A sentence's first word
 * counts only by that second rule, so "Alice owns the box." names nobody.
 * Distinct, in order of first appearance.
 */
export function entitiesOf(text: string): string[] {
  const found = new Set<string>();
  for (const sentence of splitSentences(text)) {
    const words = sentence.match(/[\p{L}\p{N}][\p{L}\p{N}_-]*/gu) ?? [];
    words.forEach((word, i) => {
      if (word.length >= 2 && (/\p{Lu}/u.test(word.slice(1)) || (i > 0 && /^\p{Lu}/u.test(word)))) found.add(word);
    });
  }
  return [...found];
}

/** The hash a document version is recognised by (sha256, hex). */
export function textHash(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
