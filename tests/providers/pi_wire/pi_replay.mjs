// Streams recorded provider responses through pi-ai's own providers and prints what they emit
// (Bedrock's through the AWS SDK's BedrockRuntimeClient: the key is a bearer token, so the SDK
// signs nothing and needs no AWS account).
//
//   NODE_PATH=<cache>/node_modules PI_AI=pi-ai-1.6.1 node pi_replay.mjs < cases.json
//
// stdin: [{"id", "api", "baseUrl"}]: each case's base URL serves its recorded body (the replay
// server of test_differential.py and test_bedrock_differential.py). stdout: one JSON line per
// case, {"id", "events"}, the events without their `partial` (the done/error event keeps its final
// message; a toolcall_delta has the call's `partialArguments` then).
import path from "node:path";
import { pathToFileURL } from "node:url";

// PI_AI: the pi-ai package folder under NODE_PATH (an npm alias such as `pi-ai-1.6.1`).
const root = path.join(process.env.NODE_PATH ?? "node_modules", process.env.PI_AI ?? "@earendil-works/pi-ai", "dist");
const load = (file) => import(pathToFileURL(path.join(root, file)).href);
const { normalizeContext, AssistantMessageEventStream } = await load("index.js");
// A tool call's partial arguments as they are when the provider pushes each delta (the consumer
// may run later, when the shared partial has moved on).
const push = AssistantMessageEventStream.prototype.push;
AssistantMessageEventStream.prototype.push = function (event) {
	if (event.type === "toolcall_delta") {
		const block = event.partial.content[event.contentIndex];
		event = { ...event, partialArguments: JSON.parse(JSON.stringify(block.arguments ?? {})) };
	}
	return push.call(this, event);
};
// Each API's provider is the module of its name (`api/openai-completions.js`, ...).
const providers = {};
const provider = async (api) => (providers[api] ??= await load(`api/${api}.js`));
// Bedrock's SDK over HTTP/1.1 (the replay server's) in a region of its own choosing.
const BEDROCK_ENV = { AWS_BEDROCK_FORCE_HTTP1: "1", AWS_REGION: "us-east-1" };

let input = "";
for await (const chunk of process.stdin) input += chunk;
const context = normalizeContext({
	systemPrompt: "You are terse.",
	messages: [{ role: "user", content: "hello", timestamp: 0 }],
});
for (const { id, api, baseUrl } of JSON.parse(input)) {
	const model = {
		id: "replay",
		name: "replay",
		api,
		provider: "replay",
		baseUrl,
		reasoning: true,
		input: ["text"],
		cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
		contextWindow: 100000,
		maxTokens: 1000,
	};
	const events = [];
	const options = { apiKey: "sk-replay", maxRetries: 0 };
	if (api === "bedrock-converse-stream") options.env = BEDROCK_ENV;
	const stream = (await provider(api)).stream(model, context, options);
	for await (const event of stream) {
		const { partial, ...rest } = event;
		events.push(rest);
	}
	process.stdout.write(`${JSON.stringify({ id, events })}\n`);
}
