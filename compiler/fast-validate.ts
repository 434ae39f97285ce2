import type { z } from "zod";

/**
 * A fast path for validating a whole file: the checks of a file kind's zod
 * schema, built once per schema as plain closures (and, for each object, a
 * small generated function that spells its keys out, as zod's own JIT does)
 * that allocate nothing but the output. zod's runtime parser allocates a payload and an issue list for
 * every value it visits; on a 1000-slot tree that was most of compile's
 * validation time.
 *
 * It answers only "valid, and here is exactly the value zod would return"
 * or "not sure" (`REFUSED`). On "not sure" — any issue, any value or shape
 * it does not model — the caller runs zod's own `safeParse`, so every
 * diagnostic still comes from zod's issues, unchanged. It models what the
 * file kinds use: strict objects, records with a string key schema, arrays,
 * strings, numbers (`z.int()`), booleans, enums, literals, optional, default and
 * prefault. A schema holding anything else (unions, transforms, pipes,
 * catch-alls, …) gets no fast path. Checks (regex, min/max, superRefine)
 * run through zod's own check functions, every one of them: a check zod
 * would skip (`when`) can only turn "valid" into "not sure".
 *
 * The output matches zod's: fresh objects, keys in the shape's order, an
 * absent optional key left out, defaults cloned as zod clones them.
 * test/compiler/fast-validate.test.ts holds it to zod on valid and invalid
 * files of every kind.
 */

/** "Not sure": let zod parse it. */
export const REFUSED: unique symbol = Symbol("refused");

type Check = (value: unknown) => unknown;

/** What the fast path reads of a zod schema (`schema._zod`). */
interface ZodInternals {
  readonly def: ZodDef;
  readonly traits: Set<string>;
  readonly optin?: "optional" | "defaulted";
  readonly optout?: "optional";
  readonly values?: Set<unknown>;
  check?: (payload: { value: unknown; issues: unknown[] }) => unknown;
}

interface ZodDef {
  readonly type: string;
  readonly checks?: ReadonlyArray<{ _zod: ZodInternals }>;
  readonly shape?: Record<string, z.ZodType>;
  readonly catchall?: z.ZodType;
  readonly keyType?: z.ZodType;
  readonly valueType?: z.ZodType;
  readonly element?: z.ZodType;
  readonly innerType?: z.ZodType;
  readonly defaultValue?: unknown;
  readonly mode?: string;
  readonly coerce?: boolean;
}

const built = new WeakMap<z.ZodType, Check | null>();

/**
 * The value zod's `schema.safeParse(value)` would return as `data`, or
 * `REFUSED` when the fast path cannot vouch for it (invalid, or not modelled).
 */
export function fastParse(schema: z.ZodType, value: unknown): unknown {
  let check = built.get(schema);
  if (check === undefined) {
    check = buildOrNull(schema);
    built.set(schema, check);
  }
  return check === null ? REFUSED : check(value);
}

/** `schema.parse(value)`: the fast path's output when it vouches for `value`, else zod's own (which throws what it finds). */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown): T {
  const fast = fastParse(schema, value);
  return fast === REFUSED ? schema.parse(value) : (fast as T);
}

/** `schema.safeParse(value)`'s data, or undefined when zod refuses `value`: the fast path's output when it vouches for `value`. */
export function parsedOrUndefined<T>(schema: z.ZodType<T>, value: unknown): T | undefined {
  const fast = fastParse(schema, value);
  if (fast !== REFUSED) return fast as T;
  const result = schema.safeParse(value);
  return result.success ? result.data : undefined;
}

function buildOrNull(schema: z.ZodType): Check | null {
  try {
    return build(schema);
  } catch (err) {
    if (err instanceof Unsupported) return null;
    throw err;
  }
}

class Unsupported extends Error {}

function internals(schema: z.ZodType): ZodInternals {
  return (schema as unknown as { _zod: ZodInternals })._zod;
}

function build(schema: z.ZodType): Check {
  const zod = internals(schema);
  const def = zod.def;
  if (def.coerce) throw new Unsupported(def.type);
  const base = buildBase(def, zod);
  const checks = checksOf(zod);
  if (checks.length === 0 || ["default", "prefault", "optional"].includes(def.type)) {
    if (checks.length > 0) throw new Unsupported("checks on a wrapper");
    return base;
  }
  // The common checks as plain tests (each exactly zod's test); any other through zod's own check function.
  const described = checks.map(plainCheck);
  if (described.every((c) => c !== undefined)) {
    const plain = (described as PlainCheck[]).map(plainTest);
    return (value) => {
      const out = base(value);
      if (out === REFUSED) return REFUSED;
      for (let i = 0; i < plain.length; i++) if (!plain[i]!(out)) return REFUSED;
      return out;
    };
  }
  const fns = checks.map((c) => {
    if (typeof c.check !== "function") throw new Unsupported("a check without a function");
    return c.check;
  });
  return (value) => {
    const out = base(value);
    if (out === REFUSED) return REFUSED;
    const payload = { value: out, issues: [] as unknown[] };
    for (const fn of fns) {
      if (fn(payload) instanceof Promise) return REFUSED;
      if (payload.issues.length > 0) return REFUSED;
    }
    return payload.value;
  };
}

/** The checks zod runs after its parse: the schema itself when it is a check (z.int()'s format), then def.checks. */
function checksOf(zod: ZodInternals): ZodInternals[] {
  return [...(zod.traits.has("$ZodCheck") ? [zod] : []), ...(zod.def.checks ?? []).map((c) => c._zod)];
}

/** A check zod runs as a plain test of the value: a regex, z.int()'s safe-integer format, a numeric bound. */
type PlainCheck =
  | { readonly kind: "pattern"; readonly pattern: RegExp }
  | { readonly kind: "safeint" }
  | { readonly kind: "bound"; readonly op: ">=" | ">" | "<=" | "<"; readonly value: number };

/** `check` as a plain test (each exactly zod's test), or undefined for any other check (zod's own function runs it). */
function plainCheck(check: ZodInternals): PlainCheck | undefined {
  const def = check.def as unknown as { check?: string; format?: string; pattern?: RegExp; value?: unknown; inclusive?: boolean; when?: unknown };
  if (def.when !== undefined) return undefined;
  if (def.check === "string_format" && def.format === "regex" && def.pattern instanceof RegExp) return { kind: "pattern", pattern: def.pattern };
  if (def.check === "number_format" && def.format === "safeint") return { kind: "safeint" };
  if ((def.check === "greater_than" || def.check === "less_than") && typeof def.value === "number") {
    const op = def.check === "greater_than" ? (def.inclusive ? ">=" : ">") : def.inclusive ? "<=" : "<";
    return { kind: "bound", op, value: def.value };
  }
  return undefined;
}

/** A plain check as a function of the value. */
function plainTest(c: PlainCheck): (v: unknown) => boolean {
  switch (c.kind) {
    case "pattern":
      return (v) => {
        c.pattern.lastIndex = 0;
        return c.pattern.test(v as string);
      };
    case "safeint":
      return (v) => Number.isSafeInteger(v);
    case "bound": {
      const bound = c.value;
      if (c.op === ">=") return (v) => (v as number) >= bound;
      if (c.op === ">") return (v) => (v as number) > bound;
      if (c.op === "<=") return (v) => (v as number) <= bound;
      return (v) => (v as number) < bound;
    }
  }
}

/** A plain check as an expression over `x` for generated code, its pattern or bound put in `consts`. */
function plainTestExpr(c: PlainCheck, consts: unknown[]): string {
  switch (c.kind) {
    case "pattern": {
      const p = constant(consts, c.pattern);
      return `(${p}.lastIndex = 0, ${p}.test(x))`;
    }
    case "safeint":
      return "Number.isSafeInteger(x)";
    case "bound":
      return `x ${c.op} ${constant(consts, c.value)}`;
  }
}

function buildBase(def: ZodDef, zod: ZodInternals): Check {
  switch (def.type) {
    case "string":
      return (v) => (typeof v === "string" ? v : REFUSED);
    case "number":
      return (v) => (typeof v === "number" && Number.isFinite(v) ? v : REFUSED);
    case "boolean":
      return (v) => (typeof v === "boolean" ? v : REFUSED);
    case "enum":
    case "literal": {
      const values = zod.values;
      if (values === undefined) throw new Unsupported(`${def.type} without values`);
      return (v) => (values.has(v) ? v : REFUSED);
    }
    case "nullable": {
      const inner = build(def.innerType!);
      return (v) => (v === null ? null : inner(v));
    }
    case "optional": {
      const inner = internals(def.innerType!);
      if (inner.optin === "defaulted") throw new Unsupported("optional around a default");
      const check = build(def.innerType!);
      return (v) => (v === undefined ? undefined : check(v));
    }
    case "default": {
      const check = build(def.innerType!);
      return (v) => {
        if (v === undefined) return def.defaultValue;
        const out = check(v);
        return out === undefined ? def.defaultValue : out;
      };
    }
    case "prefault": {
      const check = build(def.innerType!);
      return (v) => check(v === undefined ? def.defaultValue : v);
    }
    case "array": {
      const element = build(def.element!);
      return (v) => {
        if (!Array.isArray(v)) return REFUSED;
        const out = new Array(v.length);
        for (let i = 0; i < v.length; i++) {
          const item = element(v[i]);
          if (item === REFUSED) return REFUSED;
          out[i] = item;
        }
        return out;
      };
    }
    case "record": {
      if (def.mode !== undefined && def.mode !== "strict") throw new Unsupported(`record mode ${def.mode}`);
      const keyZod = internals(def.keyType!);
      if (keyZod.def.type !== "string" || keyZod.values !== undefined) throw new Unsupported("record key");
      const key = build(def.keyType!);
      const value = build(def.valueType!);
      return (v) => {
        // zod would check a symbol key too (and refuse it); TOML has none.
        if (!isPlainTable(v) || Object.getOwnPropertySymbols(v).length > 0) return REFUSED;
        const out: Record<string, unknown> = {};
        for (const k of Object.keys(v)) {
          if (k === "__proto__" || key(k) !== k) return REFUSED;
          const item = value(v[k]);
          if (item === REFUSED) return REFUSED;
          out[k] = item;
        }
        return out;
      };
    }
    case "object":
      return buildObject(def);
    default:
      throw new Unsupported(def.type);
  }
}

/**
 * A strict object (`z.strictObject`: unknown keys refused) or a plain one
 * (`z.object`: unknown keys dropped); keys written in the shape's order as zod
 * writes them. A loose object (a catchall) is zod's.
 */
function buildObject(def: ZodDef): Check {
  const strict = def.catchall !== undefined && internals(def.catchall).def.type === "never";
  if (def.catchall !== undefined && !strict) throw new Unsupported("an object with a catchall");
  const shape = def.shape!;
  if (Object.getOwnPropertySymbols(shape).length > 0) throw new Unsupported("symbol keys");
  const keys = Object.keys(shape);
  if (keys.includes("__proto__")) throw new Unsupported("__proto__ key");
  const known = new Set(keys);
  const fields = keys.map((key) => {
    const zod = internals(shape[key]!);
    // zod's rungs: required; optional in and out (written only when present); defaulted (always written).
    const mode = zod.optin === undefined ? "required" : zod.optin === "defaulted" ? (zod.optout === "optional" ? "unsupported" : "defaulted") : zod.optout === "optional" ? "optional" : "unsupported";
    if (mode === "unsupported") throw new Unsupported(`key ${key}`);
    return { key, mode, check: build(shape[key]!) };
  });
  // Straight-line code with each key spelled out (as zod's own JIT writes it): named loads and stores, no loop.
  // A plain value (a string, boolean, number or enum with plain checks, or a constant default of one) is
  // tested in line; any other through its check, each held in a const of its own.
  const consts: unknown[] = [];
  const lines = fields.map(({ key, mode }, i) => {
    const k = JSON.stringify(key);
    const plain = inlineTest(shape[key]!, consts);
    if (mode === "required") {
      if (plain !== undefined) return `x = v[${k}]; if (!(${plain.test})) return R; out[${k}] = x;`;
      return `x = v[${k}]; if (x === undefined && !(${k} in v)) return R; y = c${i}(x); if (y === R) return R; out[${k}] = y;`;
    }
    if (mode === "optional") {
      if (plain !== undefined) return `x = v[${k}]; if (x !== undefined) { if (!(${plain.test})) return R; out[${k}] = x; } else if (${k} in v) out[${k}] = undefined;`;
      return `x = v[${k}]; if (x !== undefined || ${k} in v) { y = c${i}(x); if (y === R) return R; out[${k}] = y; }`;
    }
    if (plain?.dflt !== undefined) return `x = v[${k}]; if (x === undefined) out[${k}] = ${plain.dflt}; else if (${plain.test}) out[${k}] = x; else return R;`;
    return `y = c${i}(v[${k}]); if (y === R) return R; out[${k}] = y;`;
  });
  // Unknown keys: own enumerable keys (for…in, with no array to allocate; a parsed table inherits none) not in the shape.
  const unknownKeys = strict ? "for (const key in v) if (!known.has(key)) return R;" : "// unknown keys are dropped";
  const body = `${fields.map((_, i) => `const c${i} = c[${i}];`).join(" ")} ${consts.map((_, n) => `const k${n} = k[${n}];`).join(" ")}
return function (v) {
  if (!isPlainTable(v)) return R;
  ${unknownKeys}
  const out = {};
  let x, y;
  ${lines.join("\n  ")}
  return out;
};`;
  let make: (...args: unknown[]) => Check;
  try {
    make = new Function("R", "c", "k", "known", "isPlainTable", body) as typeof make;
  } catch {
    // Code generation disallowed (--disallow-code-generation-from-strings): zod parses this kind.
    throw new Unsupported("code generation");
  }
  return make(REFUSED, fields.map((f) => f.check), consts, known, isPlainTable);
}

/**
 * A value `build` would check with plain tests, written as one expression over
 * `x` (true: valid, and `x` is the output as it is), its patterns and sets put
 * in `consts` (`k<n>`): a string, boolean, number (z.int()'s safe-integer
 * format, numeric bounds) or enum/literal, its checks all plain (plainCheck).
 * An optional one is unwrapped (its mode says how it is absent); a default
 * around one (`dflt`) when its value is a primitive that reads the same twice
 * (zod's getter returns a constant's copy, a function's result). Otherwise undefined.
 */
function inlineTest(schema: z.ZodType, consts: unknown[]): { test: string; dflt?: string } | undefined {
  let zod = internals(schema);
  let dflt: string | undefined;
  if (zod.def.type === "optional") zod = internals(zod.def.innerType!);
  else if (zod.def.type === "default") {
    const value = zod.def.defaultValue;
    if (!["string", "number", "boolean"].includes(typeof value) || zod.def.defaultValue !== value) return undefined;
    if (checksOf(zod).length > 0) return undefined;
    dflt = constant(consts, value);
    zod = internals(zod.def.innerType!);
  }
  const def = zod.def;
  if (def.coerce) return undefined;
  let base: string;
  switch (def.type) {
    case "string": base = 'typeof x === "string"'; break;
    case "boolean": base = 'typeof x === "boolean"'; break;
    case "number": base = 'typeof x === "number" && Number.isFinite(x)'; break;
    case "enum":
    case "literal":
      if (zod.values === undefined) return undefined;
      base = `${constant(consts, zod.values)}.has(x)`;
      break;
    default: return undefined;
  }
  const tests = [base];
  for (const check of checksOf(zod)) {
    const plain = plainCheck(check);
    if (plain === undefined) return undefined;
    tests.push(plainTestExpr(plain, consts));
  }
  return { test: tests.join(" && "), ...(dflt !== undefined ? { dflt } : {}) };
}

/** `value` as a const of the generated code (`k<n>`). */
function constant(consts: unknown[], value: unknown): string {
  consts.push(value);
  return `k${consts.length - 1}`;
}

/** A plain table as smol-toml builds one (not an array, a Date or a marker). */
function isPlainTable(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}
