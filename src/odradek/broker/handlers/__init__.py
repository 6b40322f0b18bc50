"""Request handlers, one module per API family.

A handler is `handle(ctx, header, frame)`. It decodes the request at once (the
frame is only valid during the call) and returns `(response header version,
body parts)`, `None` for no response, or an awaitable of either.
"""
