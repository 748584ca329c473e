// What pi-ai's isContextOverflow and isRetryableAssistantError say of failed messages.
//
//   NODE_PATH=<cache>/node_modules PI_AI=pi-ai-1.6.1 node pi_failures.mjs < cases.json
//
// stdin: [{"message": <assistant message JSON>, "contextWindow": n | null}];
// stdout: one JSON line, [[overflow, retryable], ...].
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.NODE_PATH ?? "node_modules", process.env.PI_AI ?? "@earendil-works/pi-ai", "dist");
const load = (file) => import(pathToFileURL(path.join(root, "utils", file)).href);
const { isContextOverflow } = await load("overflow.js");
const { isRetryableAssistantError } = await load("retry.js");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const answers = JSON.parse(input).map(({ message, contextWindow }) => [
	isContextOverflow(message, contextWindow ?? undefined),
	isRetryableAssistantError(message),
]);
process.stdout.write(`${JSON.stringify(answers)}\n`);
