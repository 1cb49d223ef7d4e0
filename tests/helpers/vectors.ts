/**
 * The shared test vectors (computed with the reference BLAKE3 tool). The spec keeps them in
 * `../shared/vectors/` beside the repository; a copy lives in `tests/fixtures/vectors/` so that a clean
 * clone on its own (as CI runs it) has them. When the shared directory is there, the copy must be
 * byte-identical to it, so a changed vector can never be missed.
 */
const COPY = new URL("../fixtures/vectors/", import.meta.url);
const SHARED = new URL("../../../shared/vectors/", import.meta.url);

/** Reads and parses one vectors file, checking the copy against the shared original when present. */
export async function readVectors<T>(name: string): Promise<T> {
  const copy = await Deno.readTextFile(new URL(name, COPY));
  let shared: string | null = null;
  try {
    shared = await Deno.readTextFile(new URL(name, SHARED));
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  if (shared !== null && shared !== copy) {
    throw new Error(
      `tests/fixtures/vectors/${name} differs from ../shared/vectors/${name}: copy the shared file over it`,
    );
  }
  return JSON.parse(copy) as T;
}
