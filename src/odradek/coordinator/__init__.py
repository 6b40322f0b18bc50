"""The coordinators, on one runtime. `runtime.CoordinatorRuntime` owns the internal-topic
partitions this node leads (load on becoming leader, unload on resigning), writes and
replays their records and runs every coordinator timer; `startup.start_coordinators` creates
the internal topics and starts everything for the node. On it run `group` (the group
coordinator: classic and KIP-848 groups and committed offsets in `__consumer_offsets`, whose
record format is `offsets_topic`) and `transaction` (the transaction coordinator:
transactional ids, producer ids and two-phase commits in `__transaction_state`)."""
