"""Request handlers, one module per API family: `produce`, `fetch`, `list_offsets`, `metadata`,
`api_versions`, `topics`, `partitions`, `configs`, `cluster`, `groups` and `transactions` (both
call the coordinators), `admin` (calls into the controller), `common` (decode and respond). A
handler is `handle(ctx, header, frame)`. It decodes the request at once (the frame is only
valid during the call) and returns `(response header version, body parts)`, `None` for no
response, or an awaitable of either. `broker.apis` registers them by api key."""
