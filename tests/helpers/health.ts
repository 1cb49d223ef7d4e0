/** Test helpers for the worker's health listener. */
import { waitFor } from "./db.ts";

/** A GET (or another method) with the JSON body parsed. */
export async function getJson(
  url: string,
  method = "GET",
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { method });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

/** Polls `url` until it answers `status`; returns that answer. */
export async function waitStatus(
  url: string,
  status: number,
  what: string,
  timeoutMs = 10_000,
): Promise<{ status: number; body: any; headers: Headers }> {
  let last: Awaited<ReturnType<typeof getJson>> | undefined;
  await waitFor(
    async () => (last = await getJson(url).catch(() => undefined))?.status === status,
    timeoutMs,
    what,
  );
  return last!;
}
