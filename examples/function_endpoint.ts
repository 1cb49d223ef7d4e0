/**
 * A function endpoint for an svc HTTP worker (mode "async"): answer 202 at once, do the work, then POST
 * the result to `callback_url`, forwarding the X-Service-Signature header unchanged (so the function
 * never needs the secret). Run: PORT=8000 deno run --allow-net --allow-env examples/function_endpoint.ts
 */
Deno.serve({ hostname: "127.0.0.1", port: Number(Deno.env.get("PORT") ?? 8000) }, async (req) => {
  const job = await req.json(); // job_id, kind, args, attempt, max_attempts, callback_id, callback_url, fail_url, heartbeat_url
  const signature = req.headers.get("X-Service-Signature");
  const headers = {
    "content-type": "application/json",
    ...(signature ? { "X-Service-Signature": signature } : {}),
  };
  setTimeout(async () => {
    try {
      const payload = { greeting: `hello, ${job.args.name ?? "world"}`, attempt: job.attempt }; // the work
      const res = await fetch(job.callback_url, {
        method: "POST",
        headers,
        body: JSON.stringify({ payload }),
      });
      console.log(`job ${job.job_id}: complete answered ${res.status} ${await res.text()}`);
    } catch (e) {
      console.error(`job ${job.job_id}: could not call back: ${e}`); // the callback timeout will retry the job
    }
  });
  return new Response(null, { status: 202 });
});
