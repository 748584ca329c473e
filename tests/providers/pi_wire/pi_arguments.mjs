// The partial arguments pi-ai's ToolCallArgumentsStream shows after each fragment.
//
//   NODE_PATH=<cache>/node_modules PI_AI=pi-ai-1.6.1 node pi_arguments.mjs < cases.json
//
// stdin: [[fragment, ...], ...]; stdout: one JSON line per case, the arguments after each fragment.
import path from "node:path";
import { pathToFileURL } from "node:url";

const root = path.join(process.env.NODE_PATH ?? "node_modules", process.env.PI_AI ?? "@earendil-works/pi-ai", "dist");
const { ToolCallArgumentsStream } = await import(pathToFileURL(path.join(root, "utils", "streaming-json.js")).href);

let input = "";
for await (const chunk of process.stdin) input += chunk;
for (const pieces of JSON.parse(input)) {
	const args = new ToolCallArgumentsStream();
	process.stdout.write(`${JSON.stringify(pieces.map((piece) => args.append(piece)))}\n`);
}
