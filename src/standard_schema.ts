/**
 * Standard Schema (https://standardschema.dev): the interface that zod, valibot, arktype and other
 * validators implement, so that svc can validate a kind's args with any of them without depending on one.
 *
 * The interface is copied from `@standard-schema/spec` 1.1.0 (types only; MIT License, Copyright (c) 2024
 * Colin McDonnell), with its namespace flattened into separately named interfaces. Types are compared by
 * structure, so a validator built against the original package fits these.
 *
 * @module
 */

/** A Standard Schema validator: what a kind's `schemas` entry is. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  /** The Standard Schema properties. */
  readonly "~standard": StandardSchemaV1Props<Input, Output>;
}

/** The Standard Schema properties. */
export interface StandardSchemaV1Props<Input = unknown, Output = Input> {
  /** The version number of the standard. */
  readonly version: 1;
  /** The vendor name of the schema library. */
  readonly vendor: string;
  /** Validates unknown input values. */
  readonly validate: (
    value: unknown,
    options?: StandardSchemaV1Options | undefined,
  ) => StandardSchemaV1Result<Output> | Promise<StandardSchemaV1Result<Output>>;
  /** Inferred types associated with the schema. */
  readonly types?: StandardSchemaV1Types<Input, Output> | undefined;
}

/** The result of `validate`. */
export type StandardSchemaV1Result<Output> =
  | StandardSchemaV1SuccessResult<Output>
  | StandardSchemaV1FailureResult;

/** The result when validation succeeds. */
export interface StandardSchemaV1SuccessResult<Output> {
  /** The typed output value. */
  readonly value: Output;
  /** A falsy value for `issues` indicates success. */
  readonly issues?: undefined;
}

/** Options of `validate`. */
export interface StandardSchemaV1Options {
  /** Explicit support for additional vendor-specific parameters, if needed. */
  readonly libraryOptions?: Record<string, unknown> | undefined;
}

/** The result when validation fails. */
export interface StandardSchemaV1FailureResult {
  /** The issues of failed validation. */
  readonly issues: ReadonlyArray<StandardSchemaV1Issue>;
}

/** One issue of a failed validation. */
export interface StandardSchemaV1Issue {
  /** The error message of the issue. */
  readonly message: string;
  /** The path of the issue, if any. */
  readonly path?: ReadonlyArray<PropertyKey | StandardSchemaV1PathSegment> | undefined;
}

/** A path segment of an issue. */
export interface StandardSchemaV1PathSegment {
  /** The key representing a path segment. */
  readonly key: PropertyKey;
}

/** The input and output types of a schema. */
export interface StandardSchemaV1Types<Input = unknown, Output = Input> {
  /** The input type of the schema. */
  readonly input: Input;
  /** The output type of the schema. */
  readonly output: Output;
}

/** The input type of a schema (what `enqueue` takes). */
export type InferSchemaInput<S extends StandardSchemaV1> = NonNullable<S["~standard"]["types"]>["input"];

/** The output type of a schema (what a handler gets as `job.args`). */
export type InferSchemaOutput<S extends StandardSchemaV1> = NonNullable<S["~standard"]["types"]>["output"];
