// Captures the HTTP requests pi-ai's own providers send for given calls.
//
//   NODE_PATH=<cache>/node_modules node pi_requests.mjs < cases.json
//
// stdin: [{"id", "api", "model", "context", "options"}] in pi-ai's JSON (the model's `baseUrl` is
// replaced by this script's loopback server, which records each request and answers 400). stdout:
// one JSON line per case, {"id", "method", "path", "headers", "body"}.
import http from "node:http";
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.NODE_PATH ?? "node_modules", "@earendil-works", "pi-ai", "dist");
const load = (file) => import(pathToFileURL(path.join(root, file)).href);
const { normalizeContext } = await load("index.js");
const providers = {
	"azure-openai-responses": await load("api/azure-openai-responses.js"),
	"mistral-conversations": await load("api/mistral-conversations.js"),
};

let captured;
const server = http.createServer((request, response) => {
	const chunks = [];
	request.on("data", (chunk) => chunks.push(chunk));
	request.on("end", () => {
		captured = {
			method: request.method,
			path: request.url,
			headers: request.headers,
			body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
		};
		response.writeHead(400, { "content-type": "application/json" });
		response.end(JSON.stringify({ error: { message: "captured" } }));
	});
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${server.address().port}`;

let input = "";
for await (const chunk of process.stdin) input += chunk;
for (const { id, api, model, context, options } of JSON.parse(input)) {
	captured = undefined;
	const stream = providers[api].streamSimple({ ...model, baseUrl: base + (model.baseUrl ?? "") }, normalizeContext(context), {
		maxRetries: 0,
		...options,
	});
	for await (const _ of stream) {
	}
	process.stdout.write(`${JSON.stringify({ id, ...captured })}\n`);
}
server.close();
