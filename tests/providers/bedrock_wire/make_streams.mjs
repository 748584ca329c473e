// Encodes the synthetic Converse streams of streams.json as AWS event streams, with the AWS SDK's
// own codec (EventStreamCodec of @smithy/core, which pi-ai's Bedrock client decodes with).
//
//   NODE_PATH=<pi cache>/node_modules node make_streams.mjs   # writes recordings/synthetic-*.eventstream
//
// A stream is a list of messages: ["<event type>", payload] for an event, {"exception": "<type>",
// "payload": {...}} for a modelled exception, {"error": "<code>", "message": "..."} for an
// unmodelled error; or {"messages": [...], "truncate": N} to cut the last N bytes off.
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(process.env.NODE_PATH ?? "node_modules", "noop.js"));
const { EventStreamCodec } = require("@smithy/core/event-streams");
const codec = new EventStreamCodec(
	(bytes) => new TextDecoder().decode(bytes),
	(text) => new TextEncoder().encode(text),
);
const string = (value) => ({ type: "string", value });

function encode(item) {
	if (Array.isArray(item)) {
		const [eventType, payload] = item;
		return codec.encode({
			headers: {
				":event-type": string(eventType),
				":content-type": string("application/json"),
				":message-type": string("event"),
			},
			body: new TextEncoder().encode(JSON.stringify(payload)),
		});
	}
	if (item.exception) {
		return codec.encode({
			headers: {
				":exception-type": string(item.exception),
				":content-type": string("application/json"),
				":message-type": string("exception"),
			},
			body: new TextEncoder().encode(JSON.stringify(item.payload)),
		});
	}
	return codec.encode({
		headers: {
			":error-code": string(item.error),
			":error-message": string(item.message),
			":message-type": string("error"),
		},
		body: new Uint8Array(0),
	});
}

const { streams } = JSON.parse(fs.readFileSync(path.join(here, "streams.json"), "utf8"));
for (const [name, stream] of Object.entries(streams)) {
	const messages = Array.isArray(stream) ? stream : stream.messages;
	let bytes = Buffer.concat(messages.map((item) => Buffer.from(encode(item))));
	if (stream.truncate) bytes = bytes.subarray(0, bytes.length - stream.truncate);
	fs.writeFileSync(path.join(here, "recordings", `${name}.eventstream`), bytes);
}
console.log(`${Object.keys(streams).length} streams written`);
