"""Long conversations: context accounting, compaction and budgets, as layers over an `Agent`.

* Accounting: `estimate_context(messages)` is the tokens a context takes (the last assistant
  message's usage plus an estimate of what came after it); `ContextUsage.fits(window, reserve)`.
"""

from ._tokens import IMAGE_TOKENS as IMAGE_TOKENS
from ._tokens import ContextUsage as ContextUsage
from ._tokens import estimate_context as estimate_context
from ._tokens import estimate_text as estimate_text
from ._tokens import estimate_tokens as estimate_tokens
from ._tokens import usage_tokens as usage_tokens

__all__ = (
    "IMAGE_TOKENS",
    "ContextUsage",
    "estimate_context",
    "estimate_text",
    "estimate_tokens",
    "usage_tokens",
)
