"""agentloop's values as JSON, for buses, browsers and files.

`to_json` and `from_json` map messages, events and tool results to and from their JSON form (the
camelCase keys of pi-agent-core); `dumps` and `loads` do the same to text. An `EventEnvelope`
wraps an event with its run id, turn, sequence number and time: `with_envelopes` stamps an
`agent_loop` stream, `enveloping` an `Agent` listener, and `envelope_to_json`,
`envelope_from_json` and `dumps_envelope` write and read them. `CompactEncoder` and
`CompactDecoder` write and read the compact form of a run's events, whose size grows with the
answer's rather than with its square. `event_schema()` is the JSON Schema of an envelope and
everything in it (the package ships it as `agentloop/event-schema.json`).
"""

from ._wire._compact import CompactDecoder as CompactDecoder
from ._wire._compact import CompactEncoder as CompactEncoder
from ._wire._decode import from_json as from_json
from ._wire._decode import loads as loads
from ._wire._encode import dumps as dumps
from ._wire._encode import to_json as to_json
from ._wire._envelope import Enveloper as Enveloper
from ._wire._envelope import EnvelopeStream as EnvelopeStream
from ._wire._envelope import EventEnvelope as EventEnvelope
from ._wire._envelope import dumps_envelope as dumps_envelope
from ._wire._envelope import envelope_from_json as envelope_from_json
from ._wire._envelope import envelope_to_json as envelope_to_json
from ._wire._envelope import enveloping as enveloping
from ._wire._envelope import with_envelopes as with_envelopes
from ._wire._schema import event_schema as event_schema

__all__ = (
    "CompactDecoder",
    "CompactEncoder",
    "EnvelopeStream",
    "Enveloper",
    "EventEnvelope",
    "dumps",
    "dumps_envelope",
    "envelope_from_json",
    "envelope_to_json",
    "enveloping",
    "event_schema",
    "from_json",
    "loads",
    "to_json",
    "with_envelopes",
)
