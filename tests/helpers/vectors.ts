/**
 * The test vectors of the callback contract (computed with the reference BLAKE3 tool), in
 * `tests/fixtures/vectors/`: the TypeScript and the Python implementations are both checked against them.
 */
const VECTORS = new URL("../fixtures/vectors/", import.meta.url);

/** Reads and parses one vectors file. */
export async function readVectors<T>(name: string): Promise<T> {
  return JSON.parse(await Deno.readTextFile(new URL(name, VECTORS))) as T;
}
