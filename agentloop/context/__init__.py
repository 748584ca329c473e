"""Long conversations: context accounting, compaction and budgets, as layers over an `Agent`.

* Accounting: `estimate_context(messages)` is the tokens a context takes (the last assistant
  message's usage plus an estimate of what came after it); `ContextUsage.fits(window, reserve)`.
* Compaction: `Compaction(...).attach(agent)` summarises the oldest messages when the next model
  call would not leave `reserve_tokens` of the window, on demand, and after an overflow error.
* Budgets: `Budget(...).attach(agent)` ends a run cleanly before it crosses a limit on tokens,
  cost or tool calls.
"""

from ._budget import Budget as Budget
from ._budget import BudgetTracker as BudgetTracker
from ._budget import Spent as Spent
from ._compaction import Compaction as Compaction
from ._compaction import CompactionEnd as CompactionEnd
from ._compaction import CompactionEvent as CompactionEvent
from ._compaction import CompactionListener as CompactionListener
from ._compaction import CompactionReason as CompactionReason
from ._compaction import CompactionResult as CompactionResult
from ._compaction import CompactionStart as CompactionStart
from ._compaction import CompactionState as CompactionState
from ._compaction import Compactor as Compactor
from ._compaction import find_cut_point as find_cut_point
from ._summary import SUMMARIZATION_PROMPT as SUMMARIZATION_PROMPT
from ._summary import SUMMARIZATION_SYSTEM_PROMPT as SUMMARIZATION_SYSTEM_PROMPT
from ._summary import UPDATE_SUMMARIZATION_PROMPT as UPDATE_SUMMARIZATION_PROMPT
from ._summary import CompactionError as CompactionError
from ._summary import serialize_conversation as serialize_conversation
from ._tokens import IMAGE_TOKENS as IMAGE_TOKENS
from ._tokens import ContextUsage as ContextUsage
from ._tokens import estimate_context as estimate_context
from ._tokens import estimate_text as estimate_text
from ._tokens import estimate_tokens as estimate_tokens
from ._tokens import usage_tokens as usage_tokens

__all__ = (
    "IMAGE_TOKENS",
    "SUMMARIZATION_PROMPT",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "UPDATE_SUMMARIZATION_PROMPT",
    "Budget",
    "BudgetTracker",
    "Compaction",
    "CompactionEnd",
    "CompactionError",
    "CompactionEvent",
    "CompactionListener",
    "CompactionReason",
    "CompactionResult",
    "CompactionStart",
    "CompactionState",
    "Compactor",
    "ContextUsage",
    "Spent",
    "estimate_context",
    "estimate_text",
    "estimate_tokens",
    "find_cut_point",
    "serialize_conversation",
    "usage_tokens",
)
