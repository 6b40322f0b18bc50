"""The web console: a browser view of the cluster beside the broker, like Redpanda Console,
Kafka UI or AKHQ. It talks to the cluster over the Kafka protocol (confluent-kafka's admin
client, consumer and producer), to the Schema Registry over its REST API and to a node's admin
HTTP for what the Kafka protocol does not tell a client (fenced brokers, the quorum, disk).

Modules: `server` runs it (uvicorn, one or more listeners); `app` is the starlette app: pages
are one static shell (`static/`) whose scripts call the JSON API under /api. The API's parts:
`api_cluster` (overview, topics), `api_messages` (browse, search, produce), `api_groups`
(lag, reset, delete), `api_schemas`, `api_security` (ACLs, SCRAM users). Below them:
`cluster` (admin calls), `groups` (lag, resets, the lag sampler), `security`, `messages`
(reads and the streaming search), `decode` and `protobuf_view` (the registry's wire format),
`lag_history` (the sampled lag, kept in SQLite so it survives a restart), `paging`
(server-side search and pages), `http_json` (the registry's and admin HTTP's JSON), `state`
(what every request needs).
"""
