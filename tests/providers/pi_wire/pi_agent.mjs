// Drives a pi-agent-core Agent whose stream function is the package's own `streamProxy` client,
// pointed at an agentloop `proxy_app`, and prints every agent event as one JSON line.
//
//   NODE_PATH=<cache>/node_modules node pi_agent.mjs <1.6.0|0.73.1> <proxy url> <token>
//
// The conversation (the server's ScriptedModel answers each call; see test_pi_clients.py):
//   1. "What is the weather in Paris?": thinking, text and a streamed tool call; the tool runs;
//      the second call answers with text.
//   2. "And tomorrow?": the server's model fails (an error message).
//   3. "Tell me a long story": the client aborts after the first text delta.
import path from "node:path";
import { pathToFileURL } from "node:url";

const [version, proxyUrl, authToken] = process.argv.slice(2);
const PACKAGES = { "1.6.0": "@earendil-works/pi-agent-core", "0.73.1": "pi-agent-core-0.73.1" };
if (!PACKAGES[version] || !proxyUrl || !authToken) {
	process.stderr.write("usage: node pi_agent.mjs <1.6.0|0.73.1> <proxy url> <token>\n");
	process.exit(2);
}
// The package comes from NODE_PATH (the test's npm cache): ES modules are not looked up there.
const entry = path.join(process.env.NODE_PATH ?? "node_modules", PACKAGES[version], "dist", "index.js");
const { Agent, streamProxy } = await import(pathToFileURL(entry).href);

const model = {
	id: "scripted-1",
	name: "Scripted",
	api: "scripted",
	provider: "test",
	baseUrl: "",
	reasoning: true,
	input: ["text"],
	cost: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 },
	contextWindow: 100000,
	maxTokens: 1000,
};
const weather = {
	name: "get_weather",
	label: "Weather",
	description: "The weather in a city.",
	parameters: {
		type: "object",
		properties: { city: { type: "string" } },
		required: ["city"],
	},
	execute: async (_id, args) => ({ content: [{ type: "text", text: `sunny in ${args.city}` }], details: { city: args.city } }),
};

const agent = new Agent({
	initialState: { systemPrompt: "You are terse.", model, tools: [weather], thinkingLevel: "high" },
	streamFn: (m, context, options) => streamProxy(m, context, { ...options, authToken, proxyUrl }),
});
let abortOnText = false;
agent.subscribe((event) => {
	process.stdout.write(`${JSON.stringify(event)}\n`);
	if (abortOnText && event.type === "message_update" && event.assistantMessageEvent.type === "text_delta") {
		abortOnText = false;
		agent.abort();
	}
});
const watchdog = setTimeout(() => {
	process.stderr.write("pi_agent.mjs: timed out\n");
	process.exit(3);
}, 20000);
await agent.prompt("What is the weather in Paris?");
await agent.prompt("And tomorrow?");
abortOnText = true;
await agent.prompt("Tell me a long story");
clearTimeout(watchdog);
