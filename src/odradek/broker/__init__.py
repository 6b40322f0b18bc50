"""One node on the network; it wires every lower package together. `node.run_node` (what
`odradek serve` calls) and `node.Node` start it in order: config (`server_properties.load_config`,
checked by `config.check_config`), logging (`logging_setup.setup_logging`), data dir, lock and
bound sockets (`startup.prepare`), meta.properties, metadata quorum and controller, logs,
ReplicaManager, coordinators, listener. `server.Server` is the Kafka listener (one `Connection`
per client: framing, pipelining, sendfile); `apis.Dispatcher` maps an api key to its handler in
`handlers`, which see the node through `context.BrokerContext`; `entities` builds kio responses
from plain values. A handler closes its connection by raising `transport_signals.Disconnect`;
refused requests are logged, rate-limited, by `refusals`."""
