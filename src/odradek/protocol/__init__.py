"""Kafka's wire format, sans-I/O (no sockets, no asyncio): `primitives` (Reader, Writer, varints),
`framing` (FrameDecoder, FrameReceiver: the 4-byte size prefix), `headers` (RequestHeader,
parse_request_header), `apis` (ApiKey, supported_versions, flexible and header versions),
`messages` (decode_request/encode_response over kio for the cold APIs), the hand-written hot
paths `produce` (decode_produce_request, validate_produce_batch) and `fetch`
(encode_fetch_response with FileRegion parts), `records` (magic-2 batches: BatchHeader,
validate_batches, build_batch, decode_records, control records) and `errors` (KafkaError)."""
