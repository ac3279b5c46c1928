"""`transduce serve`: a REST translation server with dynamic batching and a demo page.

Requests that arrive together are decoded together: the batcher waits up to `max_wait_ms`
after the first queued request for others with the same search options, then decodes them in
one call. Work is counted in source tokens x beam: a call holds at most `max_batch_tokens`, so
a larger request is decoded in several calls, taking turns with other requests; several calls
are in progress at once, on their own threads, taking turns on the model between decoding
steps, so that no request waits for a long call to end (one model, one computation at a time).
A request over its budget is refused (413); one past its deadline, or arriving at a full queue,
gets 503; one whose client left is dropped. A failure while decoding fails only the requests of
that batch; the server keeps running.

By concern: `schema` (the JSON bodies, derived from DecodeConfig), `limits` (bounds and how work
is counted), `jobs` and `scheduler` (the queue and the batcher: plain asyncio), `turns` (decode
threads taking turns between steps), `middleware` and `auth` (what every request passes
through), `routes`, `app` (the application) and `listen` (the address, uvicorn, and the deadline
on receiving a request). The LibreTranslate-compatible API under /libretranslate is routes over
our /translate: `libretranslate` (its routes), `libretranslate_request` (its requests, as JSON,
forms or query strings), `libretranslate_errors` (its error shape) and `markup` (html's text).
"""

from .app import create_app
from .auth import server_api_key
from .limits import Limits
from .listen import Listen, check_listen, is_loopback, run_server

__all__ = ["Limits", "Listen", "check_listen", "create_app", "is_loopback", "run_server", "server_api_key"]
