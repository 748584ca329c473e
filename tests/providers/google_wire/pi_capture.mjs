// The request bodies pi-ai's Google providers send (through Google's JS SDK) for given contexts.
//
//   NODE_PATH=<node_modules with @earendil-works/pi-ai 1.6.1> node pi_capture.mjs '<cases JSON>'
//
// Each case ({id, api, model: {id, provider}, context, options}) is streamed by pi-ai's
// `streamSimple` against a local server that records the request and answers one text chunk;
// stdout: [{id, request: {method, url, headers, body}, events}].
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";
const root = path.join(process.env.NODE_PATH ?? "node_modules", "@earendil-works", "pi-ai", "dist");
const load = (f) => import(pathToFileURL(path.join(root, f)).href);
const { normalizeContext } = await load("index.js");
const gem = await load("api/google-generative-ai.js");
const vtx = await load("api/google-vertex.js");
const { GOOGLE_MODELS } = await load("providers/google.models.js");
const { GOOGLE_VERTEX_MODELS } = await load("providers/google-vertex.models.js");
const catalog = [...Object.values(GOOGLE_MODELS), ...Object.values(GOOGLE_VERTEX_MODELS)];
const seen = [];
const sse = 'data: {"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}\r\n\r\n';
const server = http.createServer((req, res) => {
  let body = ""; req.on("data", (c) => body += c); req.on("end", () => {
    seen.push({ method: req.method, url: req.url, headers: req.headers, body: JSON.parse(body) });
    res.writeHead(200, { "content-type": "text/event-stream" }); res.end(sse);
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;
const cases = JSON.parse(process.argv[2]);
const out = [];
for (const c of cases) {
  const mod = c.api === "google-vertex" ? vtx : gem;
  const known = catalog.find((m) => m.provider === (c.model.provider ?? "google") && m.id === c.model.id);
  const model = { ...known, baseUrl: c.api === "google-vertex" ? `http://127.0.0.1:${port}/v1` : `http://127.0.0.1:${port}/v1beta`, ...(known ? {} : { cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow: 1048576, maxTokens: 65536, input: ["text", "image"], reasoning: true, provider: "google", ...c.model, api: c.api, baseUrl: c.model.baseUrl ?? `http://127.0.0.1:${port}/v1beta` }) };
  const context = normalizeContext(c.context);
  seen.length = 0;
  const s = mod.streamSimple(model, context, { apiKey: "k-test", maxRetries: 0, ...c.options });
  const evs = []; for await (const e of s) evs.push(e.type === "error" ? e.error.errorMessage : e.type);
  out.push({ id: c.id, request: seen[0], events: evs });
}
server.close();
console.log(JSON.stringify(out, null, 1));
