/**
 * Typed jobs: a task map names each job kind and the types of its args (and, optionally, of its result),
 * and `createClient<Tasks>()` / `createWorker<Tasks>()` check enqueues and handlers against it. A kind may
 * also have an args schema (any Standard Schema validator): the client validates args at enqueue and the
 * worker before the handler runs. See docs/guide/handlers.md, "Typed jobs".
 *
 * @module
 */
import type {
  InferSchemaInput,
  InferSchemaOutput,
  StandardSchemaV1,
  StandardSchemaV1Issue,
} from "./standard_schema.ts";
import { ValidationError } from "./errors.ts";

/**
 * A kind's types in a task map when it declares a result:
 * `{ resize: Task<{ url: string }, { width: number }> }`.
 * `Args` may be a Standard Schema type (`Task<typeof ResizeArgs, { width: number }>`). Types only: nothing
 * of it exists at run time.
 */
export interface Task<Args extends object = Record<string, unknown>, Result = unknown> {
  /** Type-level only: never present at run time. */
  readonly "~task": { readonly args: Args; readonly result: Result };
}

/**
 * The task map of untyped use: any kind, args any JSON object. A task map maps each kind to its args type,
 * to a `Task<Args, Result>`, or to the type of a Standard Schema of its args.
 */
export type AnyTasks = Record<string, Record<string, unknown>>;

/** The kinds of a task map. */
export type TaskKind<T> = Extract<keyof T, string>;

type Declared<E> = E extends { readonly "~task": { readonly args: infer A } } ? A : E;

/** What a handler gets as `job.args` for a task map entry (a schema's output). */
export type TaskArgs<E> = Declared<E> extends StandardSchemaV1 ? InferSchemaOutput<Declared<E>> : Declared<E>;

/** What `enqueue` takes as args for a task map entry (a schema's input). */
export type TaskInput<E> = Declared<E> extends StandardSchemaV1 ? InferSchemaInput<Declared<E>> : Declared<E>;

/** The result type a task map entry declares (`unknown` unless it is a `Task<Args, Result>`). */
export type TaskResult<E> = E extends { readonly "~task": { readonly result: infer R } } ? R : unknown;

/** The args schemas of a task map's kinds, each optional. */
export type TaskSchemas<T> = { [K in TaskKind<T>]?: StandardSchemaV1<TaskInput<T[K]>, TaskArgs<T[K]>> };

/** A map of kinds to Standard Schema validators, as `createClient({ schemas })` takes it. */
export type SchemaMap = Record<string, StandardSchemaV1<any, any>>;

/** The rest parameters of `enqueue`: args may be left out when every property of them is optional. */
export type EnqueueRest<Args, Opts> = Partial<Args> extends Args ? [args?: Args, opts?: Opts]
  : [args: Args, opts?: Opts];

/** A problem a validator found, as `ValidationError.issues` lists it. */
export interface ArgsIssue {
  /** Where in the args (`[]`: the args object itself). */
  path: (string | number)[];
  message: string;
}

/** The issues of a Standard Schema result in plain form (paths as keys). */
export function plainIssues(issues: ReadonlyArray<StandardSchemaV1Issue>): ArgsIssue[] {
  return issues.map((i) => ({
    path: (i.path ?? []).map((p) => {
      const key = typeof p === "object" && p !== null ? p.key : p;
      return typeof key === "number" ? key : String(key);
    }),
    message: String(i.message),
  }));
}

/** `address.lines[0]`; the empty path is the args object itself. */
export function formatPath(path: (string | number)[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += /^[A-Za-z_$][\w$]*$/.test(key) ? (out ? `.${key}` : key) : `[${JSON.stringify(key)}]`;
  }
  return out;
}

/** The issues in one line: `to: Invalid email; cc[1]: Expected string`. */
export function formatIssues(issues: ArgsIssue[]): string {
  return issues.map((i) => (i.path.length ? `${formatPath(i.path)}: ${i.message}` : i.message)).join("; ");
}

/** Outcome of validating args with a kind's schema. */
export type ArgsCheck = { ok: true; value: unknown } | { ok: false; issues: ArgsIssue[] };

/** Runs a kind's schema on args (sync or async validators); a validator that throws rejects with its error. */
export async function checkArgs(schema: StandardSchemaV1, args: unknown): Promise<ArgsCheck> {
  const r = await schema["~standard"].validate(args);
  if (r.issues) {
    const issues = plainIssues(r.issues);
    return { ok: false, issues: issues.length ? issues : [{ path: [], message: "invalid" }] };
  }
  return { ok: true, value: r.value };
}

/** The error of args its kind's schema refuses, naming the kind and each issue's path. */
export function argsValidationError(kind: string, issues: ArgsIssue[], where = ""): ValidationError {
  return new ValidationError(`${where}args of ${kind} are invalid: ${formatIssues(issues)}`, issues);
}

/** Checks that every entry of a `schemas` option is a Standard Schema validator. */
export function checkSchemaMap(option: string, schemas: unknown): SchemaMap {
  if (schemas === undefined) return {};
  if (typeof schemas !== "object" || schemas === null || Array.isArray(schemas)) {
    throw new ValidationError(`${option} must be an object of kind: Standard Schema validator`);
  }
  for (const [kind, s] of Object.entries(schemas)) {
    const std = (s as Partial<StandardSchemaV1> | null)?.["~standard"];
    if (!std || std.version !== 1 || typeof std.validate !== "function") {
      throw new ValidationError(
        `${option}.${kind} is not a Standard Schema validator (an object with "~standard": { version: 1, ` +
          `validate }), as zod, valibot and arktype schemas are`,
      );
    }
  }
  return schemas as SchemaMap;
}
