// Preloaded into the product UI's Next.js server (node --import) by product-ui.mjs: the UI's
// server-side calls to awp (server actions, server components) never reach the browser's network
// log, so every one that answers >= 400 is written as one JSON line on stderr (uirun_fetch: true,
// method, url, status, body). The UI's code is not touched.
const target = process.env.UIRUN_AWP_URL ?? 'http://127.0.0.1:3000';
const orig = globalThis.fetch;
globalThis.fetch = async function (input, init) {
  const res = await orig.call(this, input, init);
  try {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.startsWith(target) && res.status >= 400) {
      const body = await res.clone().text();
      const method = init?.method ?? (typeof input === 'object' && input.method) ?? 'GET';
      process.stderr.write(JSON.stringify({ uirun_fetch: true, t: new Date().toISOString(), method, url, status: res.status, body: body.slice(0, 600) }) + '\n');
    }
  } catch {}
  return res;
};
