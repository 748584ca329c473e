// The Converse request pi-ai's Bedrock provider builds for each case: its `commandInput`, caught by
// the `onPayload` hook before anything is sent.
//
//   NODE_PATH=<cache>/node_modules [PI_AI=<pi-ai folder>] node pi_requests.mjs < cases.json
//
// stdin: {"<name>": {"model", "context", "options"}} (request_cases.py's `pi_case`). stdout: one
// JSON object, {"<name>": commandInput}, bytes as base64 (as the JSON protocol sends them).
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.NODE_PATH ?? "node_modules", process.env.PI_AI ?? "@earendil-works/pi-ai", "dist");
const load = (file) => import(pathToFileURL(path.join(root, file)).href);
const { normalizeContext } = await load("index.js");
const bedrock = await load("api/bedrock-converse-stream.js");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const out = {};
for (const [name, { model, context, options }] of Object.entries(JSON.parse(input))) {
	let captured;
	const onPayload = (payload) => {
		captured = payload;
		throw new Error("captured");
	};
	const stream = bedrock.streamSimple(model, normalizeContext(context), { ...options, apiKey: "token", onPayload });
	for await (const _ of stream);
	const { modelId, ...body } = captured;
	out[name] = JSON.parse(
		JSON.stringify(body, (_, value) => (value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value)),
	);
}
process.stdout.write(JSON.stringify(out));
