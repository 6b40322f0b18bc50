"""One node on the network; it wires every lower package together. `node.run_node` (what
`odradek serve` calls) and `node.Node` start it in order: config (`config.load_config`),
meta.properties, metadata quorum and controller, logs, ReplicaManager, coordinators, listener.
`server.Server` is the Kafka listener (one `Connection` per client: framing, pipelining,
sendfile); `apis.Dispatcher` maps an api key to its handler in `handlers`, which see the node
through `context.BrokerContext`; `entities` builds kio responses from plain values."""
