// Streams recorded Bedrock Converse answers through pi-ai's own Bedrock provider (the AWS SDK's
// BedrockRuntimeClient) and prints what it emits, as ../pi_wire/pi_replay.mjs does for the other APIs.
//
//   NODE_PATH=<cache>/node_modules [PI_AI=<pi-ai folder>] node pi_replay.mjs < cases.json
//
// stdin: [{"id", "baseUrl"}]: each base URL serves one recording (the replay server of
// test_differential.py). stdout: one JSON line per case, {"id", "events"}, the events without their
// `partial` (a toolcall_delta has the call's `partialArguments` then). The key is a bearer token,
// so the SDK signs nothing and needs no AWS account.
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.NODE_PATH ?? "node_modules", process.env.PI_AI ?? "@earendil-works/pi-ai", "dist");
const load = (file) => import(pathToFileURL(path.join(root, file)).href);
const { normalizeContext, AssistantMessageEventStream } = await load("index.js");
const push = AssistantMessageEventStream.prototype.push;
AssistantMessageEventStream.prototype.push = function (event) {
	if (event.type === "toolcall_delta") {
		const block = event.partial.content[event.contentIndex];
		event = { ...event, partialArguments: JSON.parse(JSON.stringify(block.arguments ?? {})) };
	}
	return push.call(this, event);
};
const bedrock = await load("api/bedrock-converse-stream.js");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const context = normalizeContext({
	systemPrompt: "You are terse.",
	messages: [{ role: "user", content: "hello", timestamp: 0 }],
});
for (const { id, baseUrl } of JSON.parse(input)) {
	const model = {
		id: "replay",
		name: "replay",
		api: "bedrock-converse-stream",
		provider: "replay",
		baseUrl,
		reasoning: true,
		input: ["text"],
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
		contextWindow: 100000,
		maxTokens: 1000,
	};
	const events = [];
	const env = { AWS_BEDROCK_FORCE_HTTP1: "1", AWS_REGION: "us-east-1" };
	const stream = bedrock.stream(model, context, { apiKey: "sk-replay", maxRetries: 0, env });
	for await (const event of stream) {
		const { partial, ...rest } = event;
		events.push(rest);
	}
	process.stdout.write(`${JSON.stringify({ id, events })}\n`);
}
