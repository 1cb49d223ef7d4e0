/** Hand-written Standard Schema validators for tests (svc depends on no validator library). */
import type { StandardSchemaV1, StandardSchemaV1Issue } from "../../mod.ts";

type FieldType = "string" | "number" | "string[]";

/**
 * An object schema of required fields (`{ to: "string" }`) and optional ones with a default (`defaults`):
 * a missing field gets its default in the output, so input and output differ as with zod's `.default()`.
 * `async: true` validates in a promise, as some validators do.
 */
export function objectSchema<O extends Record<string, unknown>>(
  fields: Record<string, FieldType>,
  opts: { defaults?: Record<string, unknown>; async?: boolean } = {},
): StandardSchemaV1<Record<string, unknown>, O> {
  const validate = (value: unknown) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return { issues: [{ message: "expected an object" }] };
    }
    const input = value as Record<string, unknown>;
    const out: Record<string, unknown> = { ...opts.defaults, ...input };
    const issues: StandardSchemaV1Issue[] = [];
    for (const [key, type] of Object.entries(fields)) {
      const v = out[key];
      if (type === "string[]") {
        if (!Array.isArray(v)) {
          issues.push({ message: "expected an array", path: [key] });
          continue;
        }
        // Path segments as objects, as some validators give them.
        v.forEach((x, i) => {
          if (typeof x !== "string") {
            issues.push({ message: "expected a string", path: [{ key }, { key: i }] });
          }
        });
      } else if (type === "string" ? typeof v !== "string" : typeof v !== "number") {
        issues.push({ message: `expected a ${type}`, path: [key] });
      }
    }
    return issues.length ? { issues } : { value: out as O };
  };
  return {
    "~standard": {
      version: 1,
      vendor: "svc-tests",
      validate: opts.async ? (v) => Promise.resolve(validate(v)) : validate,
    },
  };
}

/** A validator that throws `error` instead of returning issues (a bug in a validator). */
export function crashingSchema(error: Error): StandardSchemaV1<Record<string, unknown>> {
  return {
    "~standard": {
      version: 1,
      vendor: "svc-tests",
      validate: () => {
        throw error;
      },
    },
  };
}
