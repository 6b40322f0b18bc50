"""The partitions this node hosts and the requests that read and write them, as Kafka's
ReplicaManager does: `manager.ReplicaManager` follows the metadata image (each partition leader
or follower, leader epochs, ISR), appends produce requests through storage's log validator
(`append_to`, acks=all through `delay_produce`) and serves fetches (`fetch_messages`, read half
in `reading`: consumers, and followers whose fetches move the ISR and HW); `partition.Partition`
holds one log with its role, leader epoch, ISR, follower states, high watermark and last stable
offset; `follower.FollowerFetchState` is a follower's truncation and fetch logic (sans-I/O) and
`fetcher` its asyncio replica fetchers; `purgatory` parks the requests that wait (DelayedFetch,
DelayedProduce); `alter_log_dirs` moves replicas between this node's log directories
(AlterReplicaLogDirs); `fetch_params` is what a fetch asks for; `config` the replica.* settings and
the AlterPartition item/result the node's controller round trip takes and gives."""
